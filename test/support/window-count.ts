/** The units a client has had admitted in the half-open second (at - 1000, at], as the client itself would count them; `at` never goes back. */
export function createWindowCount(): { add(at: number, units: number): void; within(at: number): number } {
  const times: number[] = [];
  const units: number[] = [];
  let first = 0;
  let sum = 0;
  return {
    add(at, u) {
      times.push(at);
      units.push(u);
      sum += u;
    },
    within(at) {
      while (first < times.length && times[first]! <= at - 1000) sum -= units[first++]!;
      return sum;
    },
  };
}

/** When a client sent a take and when its answer arrived: the limiter decided it somewhere in between. */
export interface Span {
  sent: number;
  answered: number;
}

/**
 * Takes surely decided within the second [s, s + 1000): sent and answered in it. A lower bound of what the
 * limiter admitted in that second whatever the delays on the way, so a test finding more than the limit has
 * found the limiter over it, not a late event loop.
 */
export function surelyWithin(spans: readonly Span[], s: number): number {
  let n = 0;
  for (const span of spans) if (span.sent >= s && span.answered < s + 1000) n++;
  return n;
}

/**
 * Takes possibly decided within the second before a decision made between `from` and `to`: an upper bound of
 * what the limiter held then, so a refusal with fewer than the limit below it was surely early.
 */
export function mayBeWithin(spans: readonly Span[], from: number, to: number): number {
  let n = 0;
  for (const span of spans) if (span.answered > from - 1000 && span.sent <= to) n++;
  return n;
}

/** The openings of the one-second windows every `stepMs` from `from` that close by `to`. */
export function everyStep(from: number, to: number, stepMs = 10): number[] {
  const starts: number[] = [];
  for (let s = from; s + 1000 <= to; s += stepMs) starts.push(s);
  return starts;
}
