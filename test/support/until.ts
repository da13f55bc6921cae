import { sharedNow } from '../../src/limits/shared-clock.js';
/** Polls `what` every 20 ms for up to `ms`; resolves with its last answer (true as soon as it holds). */
export async function until(what: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await what()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return what();
}

/**
 * Waits until `ms` at least are left in the current minute of sharedNow's clock. The unknown-key guard
 * counts an address's guesses per minute of that clock: a test that counts them must not straddle a
 * minute's end, where the count starts afresh.
 */
export async function clearOfMinuteEnd(ms = 10_000): Promise<void> {
  while (60_000 - (sharedNow() % 60_000) < ms) await new Promise((r) => setTimeout(r, 100));
}
