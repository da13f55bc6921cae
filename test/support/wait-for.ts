import { sharedNow } from '../../src/limits/shared-clock.js';

export interface WaitOptions {
  /** What is awaited, named in the error on timeout (the condition's source when left out). */
  what?: string;
  /** How long to wait before failing, in ms (5 s by default). */
  ms?: number;
}

/**
 * The suite's one wait: polls `condition` every 10 ms until it holds and resolves with the ms it took;
 * after `ms` it rejects, naming what was awaited, which fails the test that waits. A test waits for the
 * condition it needs, never for a fixed time that a slower machine could overrun.
 */
export async function waitFor(condition: () => boolean | Promise<boolean>, options: WaitOptions = {}): Promise<number> {
  const ms = options.ms ?? 5000;
  const started = Date.now();
  while (!(await condition())) {
    if (Date.now() - started > ms) {
      throw new Error(`timed out after ${ms} ms waiting for ${options.what ?? condition.toString()}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - started;
}

/**
 * Waits until `ms` at least are left in the current minute of sharedNow's clock. The unknown-key guard
 * counts an address's guesses per minute of that clock: a test that counts them must not straddle a
 * minute's end, where the count starts afresh.
 */
export async function clearOfMinuteEnd(ms = 10_000): Promise<void> {
  await waitFor(() => 60_000 - (sharedNow() % 60_000) >= ms, { what: 'the minute to turn', ms: 60_000 });
}
