/**
 * Hangs up a test peer's socket with a reset (RST), as a crashed node would. Node 20's
 * `resetAndDestroy()` on a socket whose shutdown is in flight (it was ended, e.g. by a pipe whose
 * other side ended, and the FIN is not yet out) gets EINVAL from libuv, leaves the handle open
 * while marking it closing, and the test process then spins at 100 % CPU in its exit cleanup
 * forever: the suite's timeout, not a failure, is what reports it. Such a socket is destroyed
 * instead; it is half-closed already, so the peer sees its end either way.
 */
import type { Socket } from 'node:net';

export function resetSocket(s: Socket): void {
  if (s.writableEnded && !s.writableFinished) s.destroy();
  else s.resetAndDestroy();
}
