import type { UpstreamPool } from './http-pool.js';
import { type Connection, openConnection, pushSlot, queueWrite } from './upstream-connection.js';
import { ACTIVE, QUEUED, REFUSED, type UpstreamExchange } from './upstream-exchange.js';

// Placement: which socket of the pool takes a request (the turn's batch, an idle one, a new one, the least
// loaded one that is not stalled, or the queue), and the pool's membership as sockets come and go.

/** How long a socket's head may wait before the socket counts as stalled, in ms. */
export function stallAfter(pool: UpstreamPool): number {
  return pool.usualMs < 0 ? pool.stallMs : pool.stallMs + pool.usualMs;
}

export function hasRoom(pool: UpstreamPool, conn: Connection): boolean {
  return conn.depth < pool.guard.depth && !conn.exclusive && !conn.eofDeferred;
}

function sendOn(pool: UpstreamPool, conn: Connection, ex: UpstreamExchange, at: number): void {
  ex.firstOnSocket = conn.depth === 0 && conn.completed === 0;
  if (conn.depth === 0) {
    conn.headSince = at;
    conn.pipelinedHead = false;
    conn.received = false;
  }
  pushSlot(conn, ex);
  if (ex.exclusive) conn.exclusive = true;
  ex.state = ACTIVE;
  ex.connection = conn;
  ex.sentAt = at;
  // Without pipelining too, the write waits for the end of the turn: the turn's writes then go out back
  // to back, and the node wakes once for them instead of once per call (bench/history/2026-11-25.md, evening).
  queueWrite(conn, ex.payload!);
  pool.batchConn = conn;
}

function newConnection(pool: UpstreamPool, ex: UpstreamExchange, at: number): Connection {
  const conn = openConnection(pool.socketConfig, pool.pipelining, pool);
  pool.connections.add(conn);
  sendOn(pool, conn, ex, at);
  return conn;
}

/** Whether `admit` (tryPlace's) refuses the write it is asked for. */
const refused = (admit: (() => boolean) | undefined): boolean => admit !== undefined && !admit();

/**
 * Writes ex to the best socket for it; false when it has to wait in the queue. `admit`, when given, is asked once a
 * socket is found and before anything is written (a move's budget, http-sweep.ts): false leaves ex where it was, so
 * a move that finds no socket never spends the node's budget.
 */
export function tryPlace(pool: UpstreamPool, ex: UpstreamExchange, at: number, admit?: () => boolean): boolean {
  const stallLimit = stallAfter(pool);
  const batch = pool.batchConn;
  if (
    !ex.exclusive &&
    batch !== null &&
    batch.outgoing.length > 0 &&
    !batch.dead &&
    hasRoom(pool, batch) &&
    at - batch.headSince < stallLimit
  ) {
    if (refused(admit)) return false;
    sendOn(pool, batch, ex, at);
    return true;
  }
  if (pool.idle.length > 0) {
    if (refused(admit)) return false;
    sendOn(pool, pool.idle.pop()!, ex, at);
    return true;
  }
  if (pool.connections.size < pool.maxConnections) {
    if (refused(admit)) return false;
    newConnection(pool, ex, at);
    return true;
  }
  if (ex.exclusive || pool.guard.depth === 1) return false;
  let best: Connection | null = null;
  for (const conn of pool.connections) {
    if (hasRoom(pool, conn) && !conn.socketPaused && at - conn.headSince < stallLimit && (best === null || conn.depth < best.depth)) {
      best = conn;
    }
  }
  if (best === null || refused(admit)) return false;
  sendOn(pool, best, ex, at);
  return true;
}

/** A new request: placed now, or queued behind those already waiting. */
export function place(pool: UpstreamPool, ex: UpstreamExchange, at: number): void {
  if (pool.queued > 0 || !tryPlace(pool, ex, at)) {
    pool.queue.push(ex);
    pool.queued++;
  }
}

/**
 * Places exchanges taken off a socket, oldest first; those that find no room go to the front of the queue. Each is
 * written to the node again, so each asks the node's budget first (UpstreamOptions.sendAgain): those it refuses are
 * marked REFUSED and returned, for the caller to fail (http-response.ts failUnsent) once its own callbacks have run.
 */
export function resend(pool: UpstreamPool, list: UpstreamExchange[]): UpstreamExchange[] {
  if (list.length === 0) return list;
  const at = pool.now();
  const refused: UpstreamExchange[] = [];
  const waiting: UpstreamExchange[] = [];
  for (const ex of list) {
    ex.connection = null;
    if (!pool.sendAgain(false)) {
      // Failed by the caller once its own callbacks ran (failUnsent): one of them may abort it first.
      ex.state = REFUSED;
      refused.push(ex);
      continue;
    }
    // They were sent before anything queued now, so they go in front of it, in their order, and the caller's
    // dispatchQueue() places them so.
    if (waiting.length === 0 && pool.queued === 0 && tryPlace(pool, ex, at)) continue;
    ex.state = QUEUED;
    waiting.push(ex);
  }
  if (waiting.length > 0) {
    pool.queue.unshift(...waiting);
    pool.queued += waiting.length;
  }
  return refused;
}

/** The retry after a lost socket: on one fresh socket, since the pool's other sockets may be as stale. */
export function retryOnFresh(pool: UpstreamPool, list: UpstreamExchange[]): void {
  if (list.length === 0) return;
  const at = pool.now();
  let fresh: Connection | null = null;
  for (const ex of list) {
    ex.retried = true;
    ex.connection = null;
    if (fresh !== null && !ex.exclusive && hasRoom(pool, fresh)) sendOn(pool, fresh, ex, at);
    else fresh = newConnection(pool, ex, at);
  }
}

/** Removes the connection from the pool and destroys its socket; callers then run dispatchQueue(). */
export function dropConnection(pool: UpstreamPool, conn: Connection): void {
  if (conn.dead) return;
  conn.dead = true;
  conn.remainder = null;
  pool.connections.delete(conn);
  if (conn.depth === 0) {
    const i = pool.idle.lastIndexOf(conn);
    if (i !== -1) pool.idle.splice(i, 1);
  }
  if (pool.batchConn === conn) pool.batchConn = null;
  conn.socket.destroy();
}

export function dispatchQueue(pool: UpstreamPool): void {
  if (pool.queued === 0) return;
  const at = pool.now();
  const queue = pool.queue;
  // Strictly in order: an exclusive request at the front waits for an idle socket, and the requests behind
  // it wait too, so busy sockets drain and it cannot starve.
  while (pool.queued > 0) {
    const ex = queue[0]!;
    if (ex.state !== QUEUED) {
      queue.shift();
      continue;
    }
    if (!tryPlace(pool, ex, at)) break;
    queue.shift();
    pool.queued--;
  }
  if (pool.queued === 0 && queue.length > 0) pool.queue = [];
}
