import type { UpstreamPool } from './http-pool.js';
import { dispatchQueue, dropConnection, stallAfter, tryPlace } from './http-placement.js';
import { failHead } from './http-response.js';
import { type Connection, headOf, takeLive } from './upstream-connection.js';
import { UpstreamError } from './upstream-error.js';
import { QUEUED, REFUSED, settle, type UpstreamExchange } from './upstream-exchange.js';

// The sweep: deadlines, stalled sockets and idle sockets, all on one coarse timer per upstream; and the
// pool's close, which ends every socket and request at once.

// One coarse sweep per upstream enforces every deadline, instead of a timer per request.
const SWEEP_INTERVAL_MS = 100;

/** Starts the sweep when a request arrives at a pool that has none running (it stops once the pool is empty). */
export function startSweep(pool: UpstreamPool, at: number): void {
  if (pool.sweepTimer !== undefined) return;
  pool.lastSweepAt = at;
  pool.sweepTimer = setInterval(sweep, SWEEP_INTERVAL_MS, pool);
  pool.sweepTimer.unref();
}

function timeoutError(pool: UpstreamPool, ex: UpstreamExchange): UpstreamError {
  const what = ex.headReceived ? 'response body stalled for' : 'no response head within';
  return new UpstreamError('timeout', `${pool.label}: ${what} ${ex.timeoutMs} ms`);
}

/** Requests behind the head past their deadline fail; their slots stay, to drop their late responses. */
function expireBehind(pool: UpstreamPool, conn: Connection, at: number): void {
  let expired: UpstreamExchange[] | undefined;
  const slots = conn.slots;
  for (let k = 1; k < conn.depth; k++) {
    const i = (conn.first + k) % slots.length;
    const ex = slots[i];
    if (ex == null || at < ex.deadline) continue;
    slots[i] = null;
    conn.live--;
    settle(ex);
    (expired ??= []).push(ex);
  }
  if (expired === undefined) return;
  if (conn.live === 0) dropConnection(pool, conn);
  for (const ex of expired) ex.sink.onError(timeoutError(pool, ex));
}

/** Moves the requests behind a stalled head to sockets with room, as many as have room now. */
function moveBehind(pool: UpstreamPool, conn: Connection, at: number): void {
  const slots = conn.slots;
  for (let k = 1; k < conn.depth; k++) {
    const i = (conn.first + k) % slots.length;
    const ex = slots[i];
    if (ex == null) continue;
    // Only where there is room now: when every socket is stalled the node is slow, not this socket, and
    // sending the work twice would slow it further. The node has the first copy and may answer it too, so the
    // move needs room in its budget as a call does (sendAgain), asked once a socket is found: a sweep that finds
    // none (every 100 ms while the node is slow) spends nothing.
    if (!tryPlace(pool, ex, at, () => pool.sendAgain(true))) return;
    slots[i] = null;
    conn.live--;
  }
}

/** Queued deadlines first, so an expired request is not handed a connection only to time out on it. */
function expireQueued(pool: UpstreamPool, at: number): void {
  const expired = pool.queue.filter((ex) => ex.state === QUEUED && at >= ex.deadline);
  if (expired.length === 0) return;
  pool.queue = pool.queue.filter((ex) => ex.state === QUEUED && at < ex.deadline);
  pool.queued = pool.queue.length;
  for (const ex of expired) {
    settle(ex);
    ex.sink.onError(timeoutError(pool, ex));
  }
}

function sweep(pool: UpstreamPool): void {
  const at = pool.now();
  pool.lastSweepAt = at;
  if (pool.queued > 0) expireQueued(pool, at);
  pool.guard.review(at);
  const stallLimit = stallAfter(pool);
  for (const conn of pool.connections) {
    if (conn.depth === 0) {
      if (at - conn.idleSince >= pool.idleTimeoutMs) dropConnection(pool, conn);
      continue;
    }
    const head = headOf(conn);
    if (head !== null && !head.paused) {
      if (at >= head.answerDeadline) {
        failHead(pool, conn, new UpstreamError('timeout', `${pool.label}: response not complete within ${pool.answerTimeoutMs} ms`));
        continue;
      }
      if (head.progressed) {
        // Progress happened at most one sweep ago, so the extended deadline is never early.
        head.progressed = false;
        head.deadline = at + head.timeoutMs;
      } else if (at >= head.deadline) {
        failHead(pool, conn, timeoutError(pool, head));
        continue;
      }
    }
    if (conn.depth > 1) expireBehind(pool, conn, at);
    // A socket still connecting has no answer to be late with.
    if (conn.dead || !conn.connected || at - conn.headSince < stallLimit) continue;
    if (conn.live > (head === null ? 0 : 1)) moveBehind(pool, conn, at);
    // Only discarded slots left: nobody waits for what this socket still owes.
    if (conn.live === 0) dropConnection(pool, conn);
  }
  dispatchQueue(pool);
  if (pool.connections.size === 0 && pool.queued === 0) {
    clearInterval(pool.sweepTimer);
    pool.sweepTimer = undefined;
  }
}

/** The onError(reset) of a request made after close(), delivered on the next tick unless it was aborted. */
export function refuseClosed(pool: UpstreamPool, ex: UpstreamExchange): void {
  if (ex.state !== REFUSED) return;
  settle(ex);
  ex.sink.onError(new UpstreamError('reset', `${pool.label}: upstream closed`));
}

/** Destroys every socket; in-flight and queued requests get onError(reset). */
export function closePool(pool: UpstreamPool): void {
  if (pool.closed) return;
  pool.closed = true;
  clearInterval(pool.sweepTimer);
  pool.sweepTimer = undefined;
  const orphans: UpstreamExchange[] = [];
  for (const conn of pool.connections) {
    orphans.push(...takeLive(conn, 0));
    dropConnection(pool, conn);
  }
  for (const ex of pool.queue) if (ex.state === QUEUED) orphans.push(ex);
  pool.queue = [];
  pool.queued = 0;
  for (const ex of orphans) settle(ex);
  for (const ex of orphans) ex.sink.onError(new UpstreamError('reset', `${pool.label}: upstream closed`));
}
