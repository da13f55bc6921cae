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
