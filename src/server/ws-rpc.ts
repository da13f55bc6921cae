import { performance } from 'node:perf_hooks';
import { type ErrorCode, rpcErrorBody, rpcErrorBodyFor } from '../errors.js';
import { type ParsedBody, parseBody, type ParsedItem, requestIds } from '../jsonrpc/parse.js';
import { createRefusalCounter, type RefusalCounter } from '../limits/refusals.js';
import type { Caller, Grant } from '../pipeline/admission.js';
import { askFleetForItems } from '../pipeline/fleet-gate.js';
import type { ConnectionCounts } from '../pipeline/stream-limits.js';
import type { ForwardCall } from '../pipeline/forward.js';
import { batchRefusal, collectCall, type Forward, planItem, type Settle } from '../pipeline/plan.js';
import { type SubscribingConn, subscriptionCall } from '../pipeline/subscription-calls.js';
import type { Subscription } from '../fanout/subscriptions.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { type GatewayContext, requestDone } from '../pipeline/context.js';
import type { WebSocket } from './uws.js';
import { errorText } from '../log.js';

/** A client that sends this many refused (rate-limited) messages within the window is closed with 1008. */
const REFUSALS_BEFORE_CLOSE = 100;
const REFUSAL_WINDOW_MS = 10_000;

/** uWS copies the user data's own properties into its socket: a class instance travels inside a plain object. */
export interface WsUserData {
  conn: WsConn;
}

/** What one open WebSocket carries. */
export class WsConn implements SubscribingConn {
  ws: WebSocket<WsUserData> | null = null;
  closed = false;
  firstSubId: string | null = null;
  firstSub: Subscription | null = null;
  moreSubs: Map<string, Subscription> | null = null;
  /** Calls in flight; made on the first call, as the refusal counter on the first refusal: an idle
   *  subscriber, the common connection, holds neither (bench/ws-fanout.mjs holds it to 2 KB). */
  calls: Set<ForwardCall> | null = null;
  /** eth_subscribe calls waiting for their upstream subscription: they count against the per-connection limit. */
  waitingSubscribes = 0;
  private refusals: RefusalCounter | null = null;
  /** Bytes of answers sent since the socket last drained: a large answer being read is not a slow consumer. */
  answerAllowance = 0;
  /** In a fleet: the last message still waiting for its grant (fleet-gate.ts); later ones are planned after it. */
  granting: Promise<void> | null = null;
  /** Set for a socket opened with a rotated-out key: the timer that closes it when the key's grace ends. */
  keyEnd: ReturnType<typeof setTimeout> | null = null;

  constructor(
    readonly server: WsServer,
    readonly chain: ChainRuntime,
    readonly caller: Caller,
    /** The connection-count key: `ep:<endpoint id>` or `ip:<address>`. */
    readonly countKey: string,
  ) {}

  /** Counts one rate-limit refusal; true when the client keeps hammering and must be closed. */
  refuse(): boolean {
    this.refusals ??= createRefusalCounter(REFUSALS_BEFORE_CLOSE, REFUSAL_WINDOW_MS);
    return this.refusals.refuse();
  }

  get ownerId(): number | null {
    return this.caller.auth?.ownerId ?? null;
  }

  get endpointId(): string | null {
    return this.caller.auth?.endpointId ?? null;
  }

  /** Whether what is already queued for the socket passed the limit (a large answer being read aside). */
  private overLimit(): boolean {
    return this.ws!.getBufferedAmount() > this.server.maxBufferedBytes + this.answerAllowance;
  }

  deliver(bytes: Buffer): void {
    if (this.closed) return;
    if (this.overLimit()) {
      this.server.slowConsumers++;
      this.caller.tally.ctx.metrics.slowConsumer('ws');
      this.close(1008, 'slow consumer');
      return;
    }
    this.ws!.send(bytes, false);
  }

  /** Replays waiting for the socket to drain (writable()); settled by drained() or the close. */
  private drainWaits: Array<() => void> | null = null;

  /** null while at most half of max_buffered_bytes waits for the client, else a promise settled once it is so. */
  writable(): Promise<void> | null {
    if (!this.backedUp()) return null;
    return new Promise((resolve) => (this.drainWaits ??= []).push(resolve));
  }

  private backedUp(): boolean {
    return !this.closed && this.ws!.getBufferedAmount() > this.server.maxBufferedBytes / 2;
  }

  /** The socket drained some (uWS drain) or closed: settles the waits once it can take more. */
  drained(): void {
    if (this.drainWaits === null || this.backedUp()) return;
    const waits = this.drainWaits;
    this.drainWaits = null;
    for (const resolve of waits) resolve();
  }

  /** Sends an answer to a request; it widens the slow-consumer allowance by its own size. */
  answer(body: string | Buffer): void {
    if (this.closed) return;
    this.answerAllowance += body.length;
    this.ws!.send(body, false);
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    // end() runs the close handler at once, which releases the subscriptions and counts.
    this.ws!.end(code, reason);
  }
}

export interface WsServer {
  readonly maxBufferedBytes: number;
  slowConsumers: number;
  /** Open connections, to close them on a stop or a revoked key. */
  readonly conns: Set<WsConn>;
}

/** Sends a refusal or local answer, counting rate-limit refusals toward the hammering close. */
function answerPlanned(conn: WsConn, answer: string, outcome: ErrorCode | 'ok'): void {
  conn.answer(answer);
  if (outcome === 'rate_limited' && conn.refuse()) conn.close(1008, 'Too many refused requests');
}

/** Runs one item through the shared pipeline; `done` gets its answer, in whatever turn it arrives. */
function runItem(
  ctx: GatewayContext,
  conn: WsConn,
  item: ParsedItem,
  done: (answer: string | Buffer, outcome: ErrorCode | 'ok') => void,
): void {
  const plan = planItem(ctx, conn.chain, conn.caller, item, 'ws');
  switch (plan.kind) {
    case 'answer':
      done(plan.answer, plan.outcome);
      return;
    case 'local':
      subscriptionCall(ctx, conn, conn.chain.subscriptions, conn.chain.config.slug, plan.local, done);
      return;
    case 'pending': {
      // Counted like a forwarded call, so a graceful stop waits for it. One without a call needs no abort (a closed
      // socket drops the answer); one with a call is stopped with the socket's calls, which counts it done then.
      ctx.inFlight++;
      const call = plan.call;
      if (call !== undefined) (conn.calls ??= new Set()).add(call);
      void plan.pending.then((r) => {
        if (call !== undefined && conn.calls?.delete(call) !== true) return;
        done(r.answer, r.outcome);
        requestDone(ctx);
      });
      return;
    }
    case 'forward':
      forwardItem(ctx, conn, plan.forward, done);
      return;
    default:
      throw new Error(`unknown item plan ${JSON.stringify(plan satisfies never)}`);
  }
}

/** A forwarded item over WebSocket: its answer is one message, so it is collected whole first (collectCall). */
function forwardItem(ctx: GatewayContext, conn: WsConn, forward: Forward, done: Settle): void {
  ctx.inFlight++;
  const limits = ctx.config.websocket;
  const call = collectCall(
    ctx,
    conn.chain,
    conn.caller,
    forward,
    (answer, outcome) => {
      conn.calls?.delete(call);
      done(answer, outcome);
      requestDone(ctx);
    },
    limits.max_answer_bytes,
    'websocket.max_answer_bytes',
  );
  (conn.calls ??= new Set()).add(call);
}

const COMMA = Buffer.from(',');

/** One text message: a JSON-RPC request or batch, through the same pipeline as HTTP. */
export function handleWsMessage(ctx: GatewayContext, conn: WsConn, message: ArrayBuffer, isBinary: boolean): void {
  const limits = ctx.config.websocket;
  if (isBinary) {
    conn.close(1003, 'Binary frames are not accepted: send JSON-RPC as text');
    return;
  }
  if (message.byteLength > limits.max_message_bytes) {
    conn.close(1009, `Message larger than ${limits.max_message_bytes} bytes (websocket.max_message_bytes)`);
    return;
  }
  // uWS neuters the ArrayBuffer when this handler returns: copy it out first.
  const body = Buffer.from(message.slice(0));
  // One clock per connection, restarted by each message: a call answered after the next message arrived is
  // measured from that one (the cost of no object per message).
  const tally = conn.caller.tally;
  tally.startedAt = performance.now();
  if (ctx.stopping) {
    const ids = requestIds(body);
    tally.refusedWhole('shutting_down', Array.isArray(ids) ? ids.length : 1);
    conn.answer(rpcErrorBodyFor('shutting_down', ids));
    return;
  }
  const parsed = parseBody(body);
  if (parsed.kind === 'error') {
    tally.refusedWhole(parsed.error, 1);
    conn.answer(rpcErrorBody(parsed.error, 'null', parsed.message));
    return;
  }
  if (parsed.kind === 'batch') {
    const tooMany = batchRefusal(ctx, conn.caller, parsed.items);
    if (tooMany !== null) {
      tally.refusedWhole('batch_too_large', parsed.items.length);
      conn.answer(tooMany);
      return;
    }
  }
  const t = ctx.tenancy;
  if (t.fleet === null) {
    planMessage(ctx, conn, parsed);
    return;
  }
  const items = parsed.kind === 'single' ? [parsed.item] : parsed.items;
  afterGrant(ctx, conn, askFleetForItems(ctx, conn.chain, conn.caller, items), () => planMessage(ctx, conn, parsed));
}

/**
 * Plans a fleet's message once its grant is in, in the order the messages came: a subscribe sent before an
 * unsubscribe is planned before it, whichever grant came back first.
 */
function afterGrant(ctx: GatewayContext, conn: WsConn, asked: Promise<Grant>, plan: () => void): void {
  const before = conn.granting;
  // A message that failed does not hold up the ones after it.
  const granted =
    before === null
      ? asked
      : before.then(
          () => asked,
          () => asked,
        );
  const done = granted.then((grant) => {
    if (conn.closed) return;
    conn.caller.grant = grant;
    try {
      plan();
    } finally {
      conn.caller.grant = undefined;
    }
  });
  conn.granting = done;
  done.then(
    () => {
      if (conn.granting === done) conn.granting = null;
    },
    (err: unknown) => {
      if (conn.granting === done) conn.granting = null;
      // A fault of planning, which on one machine would have been thrown to uWS: logged, and the socket closed.
      ctx.log.error('a WebSocket message failed after its fleet grant', { error: errorText(err) });
      conn.close(1011, 'Internal error');
    },
  );
}

function planMessage(ctx: GatewayContext, conn: WsConn, parsed: Exclude<ParsedBody, { kind: 'error' }>): void {
  if (parsed.kind === 'single') {
    runItem(ctx, conn, parsed.item, (answer, outcome) => answerPlanned(conn, answer.toString(), outcome));
    return;
  }
  const items = parsed.items;
  const answers: Array<string | Buffer> = new Array(items.length);
  let refused = 0;
  let pending = items.length;
  items.forEach((item, i) => {
    runItem(ctx, conn, item, (answer, outcome) => {
      answers[i] = answer;
      if (outcome === 'rate_limited') refused++;
      if (--pending > 0) return;
      const parts: Buffer[] = [Buffer.from('[')];
      answers.forEach((a, j) => {
        if (j > 0) parts.push(COMMA);
        parts.push(typeof a === 'string' ? Buffer.from(a) : a);
      });
      parts.push(Buffer.from(']'));
      conn.answer(Buffer.concat(parts));
      for (let r = 0; r < refused; r++) {
        if (conn.refuse()) {
          conn.close(1008, 'Too many refused requests');
          break;
        }
      }
    });
  });
}

/** The socket closed (either side, any reason): stop its calls and release its subscriptions and count. */
export function handleWsClose(ctx: GatewayContext, conn: WsConn, counts: ConnectionCounts): void {
  conn.closed = true;
  conn.ws = null;
  conn.drained();
  if (conn.keyEnd !== null) clearTimeout(conn.keyEnd);
  conn.keyEnd = null;
  conn.chain.metrics.wsConnection(-1);
  for (const c of conn.calls ?? []) {
    c.abort();
    requestDone(ctx);
  }
  conn.calls = null;
  conn.chain.subscriptions?.dropConnection(conn);
  conn.server.conns.delete(conn);
  counts.close(conn.countKey);
  ctx.connections.release();
}
