/**
 * Monotonic milliseconds on one time line for every thread of the process: the default clock of the
 * shared-memory limits, where entries written under one thread's clock are read against another's.
 *
 * `performance.now()` counts from an origin Node has kept per thread in some versions (a worker's started
 * at 0 when the worker did), and `performance.timeOrigin + performance.now()` puts that origin on the wall
 * clock as read when each thread started, so a wall-clock step between two threads' starts (NTP, an
 * operator) would set them apart for good. `process.hrtime()` reads CLOCK_MONOTONIC itself: one clock for
 * the whole machine, untouched by wall-clock steps, the same in every thread. It is what performance.now()
 * reads underneath, so it costs no more.
 */
export function sharedNow(): number {
  const [seconds, nanoseconds] = process.hrtime();
  return seconds * 1000 + nanoseconds / 1e6;
}
