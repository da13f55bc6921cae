import type { UpstreamPool } from './http-pool.js';
import { dispatchQueue, dropConnection, resend, retryOnFresh } from './http-placement.js';
import { type Connection, discardSlot, headOf, shiftSlot, takeLive } from './upstream-connection.js';
import { errorCause, UpstreamError } from './upstream-error.js';
import { ACTIVE, QUEUED, REFUSED, settle, type UpstreamExchange } from './upstream-exchange.js';

// The response: a socket's bytes through its parser to the head exchange's sink, in order; the end of a
// response, of a socket, or of the consumer's interest (abort, distrust), and the pause and resume between.

export function connected(pool: UpstreamPool, conn: Connection): void {
  conn.connected = true;
  const at = pool.now();
  // The handshake is a first measure of the round trip, before any answer is.
  if (pool.usualMs < 0) pool.usualMs = at - conn.openedAt;
  if (conn.depth > 0) conn.headSince = at;
}

export function deliverHead(conn: Connection, status: number, headers: Array<[string, string]>, length?: number): void {
  const ex = headOf(conn);
  if (ex === null) return;
  ex.headReceived = true;
  ex.progressed = true;
  ex.bodyLength = length ?? -1;
  ex.sink.onHead(status, headers, length);
}

export function deliverBody(pool: UpstreamPool, conn: Connection, chunk: Buffer, start: number, end: number): boolean {
  if (conn.dead) return false;
  const ex = headOf(conn);
  // A discarded head's body is read only to reach the next response.
  if (ex === null) return true;
  ex.progressed = true;
  const sink = ex.sink;
  if (end - start === ex.bodyLength && sink.onWholeBody !== undefined) {
    // The whole body in this read: lent, not copied (the parser completes the response before the next read).
    sink.onWholeBody(start === 0 && end === chunk.length ? chunk : chunk.subarray(start, end));
    return true;
  }
  let piece: Buffer;
  if (conn.borrowed) {
    piece = Buffer.allocUnsafe(end - start);
    chunk.copy(piece, 0, start, end);
  } else {
    piece = start === 0 && end === chunk.length ? chunk : chunk.subarray(start, end);
  }
  if (sink.onData(piece)) return true;
  if (conn.dead) return false;
  // Aborted inside onData while others share the socket: the rest of its body is read and dropped.
  if (ex.state !== ACTIVE) return true;
  ex.paused = true;
  ex.pausedAt = pool.now();
  return false;
}

/** Parses chunk[from, limit) on conn: one response per in-flight slot, in order. */
export function parseFrom(pool: UpstreamPool, conn: Connection, chunk: Buffer, from: number, limit: number, borrowed: boolean): void {
  conn.borrowed = borrowed;
  const parser = conn.parser;
  // One clock read for the answers of one read, taken when the first completes: they arrived together.
  let at = -1;
  for (;;) {
    if (conn.depth === 0) {
      // Bytes when nothing is in flight answer no request: the stream is out of step.
      dropConnection(pool, conn);
      dispatchQueue(pool);
      return;
    }
    if (!conn.received) {
      conn.received = true;
      const head = headOf(conn);
      if (head !== null) head.payload = null;
    }
    const stop = parser.execute(chunk, from, limit);
    if (conn.dead) return;
    if (parser.error !== undefined) {
      failHead(pool, conn, new UpstreamError('protocol', `${pool.label}: ${parser.error}`));
      return;
    }
    if (!parser.done) {
      // The parser stops short only when the consumer paused.
      if (stop < limit) conn.remainder = borrowed ? Buffer.from(chunk.subarray(stop, limit)) : chunk.subarray(stop, limit);
      const head = headOf(conn);
      if (head?.paused && !conn.socketPaused) {
        conn.socketPaused = true;
        conn.socket.pause();
      }
      return;
    }
    if (at < 0) at = pool.now();
    if (!completeHead(pool, conn, stop < limit, at) || stop === limit) return;
    from = stop;
  }
}

/** The head's response is complete; returns whether conn reads on (the bytes after it are the next response). */
function completeHead(pool: UpstreamPool, conn: Connection, trailing: boolean, at: number): boolean {
  const ex = shiftSlot(conn);
  const keepAlive = conn.parser.keepAlive;
  conn.parser.reset();
  conn.completed++;
  conn.received = false;
  if (ex !== null) {
    const usualMs = pool.usualMs;
    if (conn.pipelinedHead) pool.guard.observe(at - conn.headSince, usualMs, at);
    const took = at - ex.sentAt;
    pool.usualMs = usualMs < 0 ? took : usualMs + (took - usualMs) * (took < usualMs ? 0.25 : 0.03125);
    settle(ex);
  }
  // Bytes after the last owed response, or a FIN already seen, end the socket as well.
  if (!keepAlive || (conn.depth === 0 && (trailing || conn.eofDeferred))) {
    const behind = takeLive(conn, 0);
    dropConnection(pool, conn);
    // The server said it closes: it reads nothing after this response, so those behind it are sent again.
    const unsent = resend(pool, behind);
    dispatchQueue(pool);
    if (ex !== null) ex.sink.onEnd();
    failUnsent(pool, unsent);
    return false;
  }
  if (conn.depth === 0) {
    conn.idleSince = pool.lastSweepAt;
    pool.idle.push(conn);
  } else {
    conn.headSince = at;
    conn.pipelinedHead = true;
  }
  dispatchQueue(pool);
  if (ex !== null) {
    // The consumer may find the response is not its own (distrust) only once it has it whole.
    ex.endingOn = conn;
    ex.sink.onEnd();
    ex.endingOn = null;
  }
  return !conn.dead;
}

/** The head fails with err and the socket is dropped; requests behind it, which got no byte, go elsewhere. */
export function failHead(pool: UpstreamPool, conn: Connection, err: UpstreamError): void {
  const head = headOf(conn);
  const behind = takeLive(conn, 1);
  dropConnection(pool, conn);
  if (head !== null) settle(head);
  const unsent = resend(pool, behind);
  dispatchQueue(pool);
  if (head !== null) head.sink.onError(err);
  failUnsent(pool, unsent);
}

/** Fails the requests resend() took off a lost socket and the node's budget let go no further (not those aborted since). */
function failUnsent(pool: UpstreamPool, unsent: readonly UpstreamExchange[]): void {
  for (const ex of unsent) {
    if (ex.state !== REFUSED) continue;
    settle(ex);
    ex.sink.onError(new UpstreamError('reset', `${pool.label}: socket lost, and no room in the node's budget to send the request again`));
  }
}

export function endOfStream(pool: UpstreamPool, conn: Connection): void {
  if (conn.dead) return;
  const head = headOf(conn);
  if (head?.paused) conn.eofDeferred = true;
  else connectionLost(pool, conn, undefined);
}

export function connectionLost(pool: UpstreamPool, conn: Connection, err: Error | undefined): void {
  if (conn.dead || (conn.eofDeferred && err === undefined)) return;
  if (conn.depth === 0) {
    dropConnection(pool, conn);
    dispatchQueue(pool);
    return;
  }
  if (err === undefined && conn.parser.finish()) {
    // A close-delimited body ends here; it was not keep-alive, so those behind it are sent again.
    completeHead(pool, conn, false, pool.now());
    return;
  }
  const head = headOf(conn);
  const midResponse = conn.received;
  const wasConnected = conn.connected;
  const behind = takeLive(conn, 1);
  dropConnection(pool, conn);
  const again: UpstreamExchange[] = [];
  const failed: UpstreamExchange[] = [];
  // Once per exchange: a server that closes again gets a reset. The head of a new socket is not re-sent: the
  // server may have acted on it. Those behind any head are idempotent, never exclusive. Each re-sent one is
  // written to the node again, which may have read it: only with room in the node's budget (sendAgain).
  if (head !== null)
    (wasConnected && !midResponse && !head.retried && !head.firstOnSocket && pool.sendAgain(false) ? again : failed).push(head);
  for (const ex of behind) (wasConnected && !ex.retried && pool.sendAgain(false) ? again : failed).push(ex);
  for (const ex of failed) settle(ex);
  retryOnFresh(pool, again);
  dispatchQueue(pool);
  if (failed.length === 0) return;
  const reason = err === undefined ? 'connection closed' : errorCause(err);
  for (const ex of failed) {
    ex.sink.onError(
      wasConnected
        ? new UpstreamError('reset', `${pool.label}: ${reason} before the response was complete`, { cause: err })
        : new UpstreamError('connect', `${pool.label}: cannot connect (${reason})`, { cause: err }),
    );
  }
}

export function abortExchange(pool: UpstreamPool, ex: UpstreamExchange): void {
  if (ex.state === QUEUED) {
    settle(ex);
    pool.queued--;
  } else if (ex.state === REFUSED) {
    settle(ex);
  } else if (ex.state === ACTIVE) {
    const conn = ex.connection!;
    const wasHead = headOf(conn) === ex;
    const paused = ex.paused;
    settle(ex);
    ex.paused = false;
    if (conn.live > 1 && discardSlot(conn, ex)) {
      // Others share the socket: it stays, and the response is read and dropped. A paused head held the socket;
      // reading resumes on the next tick, so abort() never runs another request's callbacks.
      if (wasHead && paused) process.nextTick(continueReading, pool, conn);
    } else {
      dropConnection(pool, conn);
      dispatchQueue(pool);
    }
  }
}

export function distrustExchange(pool: UpstreamPool, ex: UpstreamExchange): void {
  const conn = ex.state === ACTIVE ? ex.connection : ex.endingOn;
  if (conn === null) {
    abortExchange(pool, ex);
    return;
  }
  ex.endingOn = null;
  if (ex.state === ACTIVE) {
    settle(ex);
    ex.paused = false;
    discardSlot(conn, ex);
  }
  if (conn.dead) return;
  // Nothing behind it got a byte: whatever the socket owed them, they are sent again on another.
  const behind = takeLive(conn, 0);
  dropConnection(pool, conn);
  const unsent = resend(pool, behind);
  dispatchQueue(pool);
  failUnsent(pool, unsent);
}

export function resumeExchange(pool: UpstreamPool, ex: UpstreamExchange): void {
  if (ex.state !== ACTIVE || !ex.paused) return;
  ex.paused = false;
  ex.progressed = true;
  // The sweep skips a paused body; without this its first look after the pause would count the pause too.
  ex.answerDeadline += Math.max(0, pool.now() - ex.pausedAt);
  continueReading(pool, ex.connection!);
}

/** Reads on after the head's consumer resumed or went away: held bytes first, then a held FIN, then the socket. */
function continueReading(pool: UpstreamPool, conn: Connection): void {
  if (conn.dead) return;
  let head = headOf(conn);
  if (head?.paused) return;
  const rest = conn.remainder;
  if (rest !== null) {
    conn.remainder = null;
    parseFrom(pool, conn, rest, 0, rest.length, false);
    if (conn.dead || conn.remainder !== null) return;
    head = headOf(conn);
    if (head?.paused) return;
  }
  if (conn.eofDeferred) {
    conn.eofDeferred = false;
    connectionLost(pool, conn, undefined);
  } else if (conn.socketPaused) {
    conn.socketPaused = false;
    conn.socket.resume();
  }
}
