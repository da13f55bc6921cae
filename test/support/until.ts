/** Polls `what` every 20 ms for up to `ms`; resolves with its last answer (true as soon as it holds). */
export async function until(what: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await what()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return what();
}
