/**
 * An eth_getLogs over more blocks than the chain's max_logs_block_range, on a chain with `split_logs: true`:
 * instead of being refused it is cut into windows of at most max_logs_block_range blocks, each sent as the
 * eth_getLogs a client would send for that window alone (so it is answered from the response cache, shared
 * with identical reads in flight and moved once to another node on failure like any read: shared-call.ts),
 * SPLIT_PARALLEL at a time across the nodes in rotation, and the logs are merged in block order into one
 * answer.
 *
 * - Metering: every window is a call of the method. Admission sets aside the method's RU for every window at
 *   once (402 when the balance does not cover them); the charge is what was fetched: a window's RU, or the
 *   cache-hit price when the cache answered it, each with the size surcharge of its own answer.
 * - Bounded: past max_logs_answer_bytes of logs (over a WebSocket, websocket.max_answer_bytes when lower) the
 *   call is abandoned, answered -32602 naming the limit, and charged for the windows fetched.
 * - A window no node answered (after its move to another node) fails the whole call: the upstream error of the
 *   table (502), refunded. A node's JSON-RPC error for a window is the call's answer, as it would be for one call.
 * - `safe` and `finalized` ends are asked of a node first; `latest`, `pending` and an omitted end are the head
 *   the gateway knows when the call is planned, `earliest` is 0. A blockHash query is never split.
 * - The keyless path is not metered, so it keeps the range limit: a split is made for endpoint keys only.
 */
import { type ErrorCode, rpcCustomErrorBody, rpcErrorBody } from '../errors.js';
import { logRangeOf } from '../jsonrpc/log-range.js';
import { arrayItems, mergedLogsAnswer, windowCount, windowFilter } from '../jsonrpc/log-windows.js';
import { isQuantity } from '../jsonrpc/param-types.js';
import { rawResult } from '../jsonrpc/raw-result.js';
import type { MethodRow } from '../jsonrpc/method-rule.js';
import { isRpcError } from '../chain/attempts.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { NodeRpcError } from '../upstreams/rpc-call.js';
import { type Admission, type Caller, costWithSize, settleCall } from './admission.js';
import type { GatewayContext } from './context.js';
import type { ForwardCall, RoutedSink } from './forward.js';
import type { Forward, ItemPlan, PlannedAnswer, Transport } from './plan.js';
import { sharedCall } from './shared-call.js';
import { failedCallAnswer, logUpstreamFailure, settleUpstreamFailure } from './upstream-failures.js';
import { errorText } from '../log.js';

/** Windows of one call in flight at a time: a wide query never holds more than this many node calls. */
export const SPLIT_PARALLEL = 4;

const METHOD = 'eth_getLogs';

/** Tags whose block the nodes know and the gateway does not: asked of a node before the windows are cut. */
const ASKED_TAGS: ReadonlySet<unknown> = new Set(['safe', 'finalized']);

/** An eth_getLogs to split, as planned: its filter, its range with head tags counted as the head, and its windows. */
export interface WideLogs {
  filter: Record<string, unknown>;
  from: number;
  to: number;
  /** Windows over from..to: what admission sets aside (`safe`/`finalized` ends may make it fewer). */
  windows: number;
}

/**
 * The eth_getLogs (already validated) to split, or null when it goes the usual way: the chain does not split,
 * the caller is keyless, it names a blockHash, its range fits max_logs_block_range, or the range cannot be told
 * (an end needs the unknown head, or it lies past 2^53).
 */
export function wideLogRange(chain: ChainRuntime, caller: Caller, params: unknown[]): WideLogs | null {
  const c = chain.config;
  if (!c.split_logs || caller.auth === null) return null;
  const filter = params[0] as Record<string, unknown>;
  if (filter.blockHash != null) return null;
  const ends = logRangeOf(filter, chain.head.now());
  if (ends === undefined || ends.to - ends.from < BigInt(c.max_logs_block_range) || ends.to > BigInt(Number.MAX_SAFE_INTEGER)) return null;
  const from = Number(ends.from);
  const to = Number(ends.to);
  return { filter, from, to, windows: windowCount(from, to, c.max_logs_block_range) };
}

/** An admitted split eth_getLogs: its id, the RU set aside for every window, and the method's catalogue row. */
export interface SplitCall {
  idText: string;
  admission: Extract<Admission, { ok: true }>;
  row: MethodRow;
}

/** The plan of an admitted split eth_getLogs: its answer to come, and the call that stops it when the client goes. */
export function splitLogsPlan(
  ctx: GatewayContext,
  chain: ChainRuntime,
  caller: Caller,
  call: SplitCall,
  wide: WideLogs,
  transport: Transport,
): ItemPlan {
  const c = chain.config;
  const wsMax = ctx.config.websocket.max_answer_bytes;
  // An answer over a WebSocket is held whole and bounded by its own limit: the lower one applies, by its name.
  const limit =
    transport === 'ws' && wsMax < c.max_logs_answer_bytes
      ? { bytes: wsMax, name: 'websocket.max_answer_bytes' }
      : { bytes: c.max_logs_answer_bytes, name: `chains.${c.slug}.max_logs_answer_bytes` };
  const run = splitLogs(ctx, chain, caller, call, wide, limit);
  return { kind: 'pending', pending: run.answer, call: run };
}

/** A split eth_getLogs on its way (see the top of this file). */
export interface SplitLogs extends ForwardCall {
  /** Settled before it resolves; never rejects; never resolves once aborted. */
  readonly answer: Promise<PlannedAnswer>;
}

export function splitLogs(
  ctx: GatewayContext,
  chain: ChainRuntime,
  caller: Caller,
  call: SplitCall,
  wide: WideLogs,
  limit: { bytes: number; name: string },
): SplitLogs {
  const run = new SplitLogsCall(ctx, chain, caller, call, wide, limit);
  const ask = [wide.filter.fromBlock, wide.filter.toBlock].some((tag) => ASKED_TAGS.has(tag));
  if (!ask) run.cut(wide);
  else
    void askedEnds(chain, wide, run.asking.signal).then(
      (ends) => run.endsAsked(ends),
      (err: unknown) => run.endsFailed(err),
    );
  return run;
}

/** One split eth_getLogs: its windows in flight, the logs held so far and what they cost, in fields. */
class SplitLogsCall implements SplitLogs {
  readonly answer: Promise<PlannedAnswer>;
  /** Stops the asking of `safe`/`finalized` ends when the call stops first. */
  readonly asking = new AbortController();
  /** Admission set aside the same RU for every window. */
  private readonly windowRu: number;
  private readonly size: number;
  /** A streamed window is dropped once its bytes alone, less the envelope around its logs, pass the limit. */
  readonly envelope: number;
  private readonly inFlight = new Map<number, ForwardCall>();
  private items: Buffer[] = [];
  private from: number;
  private to: number;
  private count = 0;
  private next = 0;
  private fetched = 0;
  /** RU of the windows fetched so far, each at its own price. */
  private charged = 0;
  /** Bytes of logs held so far. */
  held = 0;
  stopped = false;
  private resolve!: (a: PlannedAnswer) => void;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly chain: ChainRuntime,
    private readonly caller: Caller,
    private readonly call: SplitCall,
    private readonly wide: WideLogs,
    readonly limit: { bytes: number; name: string },
  ) {
    this.answer = new Promise<PlannedAnswer>((r) => (this.resolve = r));
    this.windowRu = call.admission.ru / wide.windows;
    this.size = chain.config.max_logs_block_range;
    this.envelope = call.idText.length + 64;
    this.from = wide.from;
    this.to = wide.to;
  }

  /** Ends the call once: the windows still in flight are dropped and `answer` resolves with `planned`. */
  private stop(planned: PlannedAnswer | null): void {
    if (this.stopped) return;
    this.stopped = true;
    this.asking.abort();
    for (const c of this.inFlight.values()) c.abort();
    this.inFlight.clear();
    this.items = [];
    if (planned !== null) this.resolve(planned);
  }

  /** Ends with `body`, charged for the windows fetched. */
  private charge(body: string | Buffer, outcome: ErrorCode | 'ok'): void {
    settleCall(this.ctx.tenancy, this.caller, METHOD, this.call.admission, { ok: true, bytes: body.length, ru: this.charged });
    this.stop({ answer: body, outcome });
  }

  /** Ends with a node's refusal (`code`, `message`), nothing charged: no window was fetched. */
  private refuse(code: number, message: string): void {
    settleCall(this.ctx.tenancy, this.caller, METHOD, this.call.admission, { ok: false, status: code, code: null });
    this.stop({ answer: rpcCustomErrorBody(code, this.call.idText, message), outcome: 'ok' });
  }

  failUpstream(reason: string, upstream: string | undefined): void {
    const { ctx, call } = this;
    logUpstreamFailure(ctx, this.chain, upstream ?? '', reason);
    settleUpstreamFailure(ctx, this.caller, { method: METHOD, admission: call.admission }, reason, upstream);
    const failed = failedCallAnswer(reason, call.idText);
    this.stop({ answer: failed.body, outcome: failed.code });
  }

  overLimit(): void {
    const limit = this.limit;
    this.charge(
      rpcErrorBody(
        'invalid_params',
        this.call.idText,
        `The eth_getLogs answer is larger than the limit of ${limit.bytes} bytes (${limit.name}); narrow the block range or the filter`,
      ),
      'invalid_params',
    );
  }

  /** A window's whole answer: its logs kept in their place, or the end of the call. */
  windowAnswered(i: number, f: Forward, body: Buffer): void {
    if (this.stopped) return;
    this.inFlight.delete(i);
    this.fetched++;
    this.charged += costWithSize(f.admission.ru, body.length);
    const result = rawResult(body);
    if (result === null) {
      // An error object is the node's answer to this window, with the client's id: the call's answer.
      if (isRpcError(body)) this.charge(body, 'ok');
      else this.failUpstream('upstream answer has no result', undefined);
      return;
    }
    const logs = arrayItems(result);
    if (logs === null) {
      this.failUpstream('upstream eth_getLogs result is not an array', undefined);
      return;
    }
    this.held += logs.length;
    if (this.held > this.limit.bytes) {
      this.overLimit();
      return;
    }
    this.items[i] = logs;
    this.launch();
  }

  private launch(): void {
    const { ctx, chain, call } = this;
    while (!this.stopped && this.inFlight.size < SPLIT_PARALLEL && this.next < this.count) {
      const i = this.next++;
      const params = [windowFilter(this.wide.filter, this.from, this.to, this.size, i)];
      const f: Forward = {
        method: METHOD,
        row: call.row,
        params,
        paramsJson: JSON.stringify(params),
        idText: call.idText,
        admission: { ok: true, reservation: null, ru: this.windowRu, span: undefined },
        watch: null,
      };
      // Set before the window's sink can run: a sink never runs before sharedCall returns.
      this.inFlight.set(i, sharedCall(ctx, chain, f, new WindowSink(this, i, f)));
    }
    if (!this.stopped && this.fetched === this.count) this.charge(mergedLogsAnswer(call.idText, this.items), 'ok');
  }

  /** Cuts from..to into windows and starts them. */
  cut(ends: { from: number; to: number }): void {
    this.from = ends.from;
    this.to = ends.to;
    this.count = windowCount(ends.from, ends.to, this.size);
    this.launch();
  }

  /** The `safe`/`finalized` ends a node told (or its message that it knows no such block). */
  endsAsked(ends: { from: number; to: number } | string): void {
    if (this.stopped) return;
    if (typeof ends === 'string') this.refuse(-32000, ends);
    else this.cut(ends);
  }

  endsFailed(err: unknown): void {
    if (this.stopped) return;
    if (err instanceof NodeRpcError) this.refuse(err.code, err.message);
    else this.failUpstream(errorText(err), undefined);
  }

  abort(): void {
    if (this.stopped) return;
    // The client went away: the windows fetched were the nodes' work, and are paid for.
    settleCall(this.ctx.tenancy, this.caller, METHOD, this.call.admission, { ok: true, bytes: 0, ru: this.charged });
    this.stop(null);
  }

  resume(): void {}
}

/** The sink of one window: a whole answer, or one streamed in pieces (over WHOLE_ANSWER_BYTES), collected. */
class WindowSink implements RoutedSink {
  failedUpstream?: string;
  private parts: Buffer[] = [];
  private bytes = 0;

  constructor(
    private readonly run: SplitLogsCall,
    private readonly i: number,
    private readonly f: Forward,
  ) {}

  whole(body: Buffer): void {
    this.run.windowAnswered(this.i, this.f, body);
  }

  begin(): void {}

  chunk(buf: Buffer): boolean {
    const run = this.run;
    if (run.stopped) return true;
    this.bytes += buf.length;
    if (run.held + this.bytes > run.limit.bytes + run.envelope) run.overLimit();
    else this.parts.push(buf);
    return true;
  }

  end(): void {
    const body = Buffer.concat(this.parts, this.bytes);
    this.parts = [];
    this.run.windowAnswered(this.i, this.f, body);
  }

  fail(_started: boolean, reason: string): void {
    if (!this.run.stopped) this.run.failUpstream(reason, this.failedUpstream);
  }
}

/**
 * The range's ends with `safe` and `finalized` read from a node (eth_getBlockByNumber); the message of a node-like
 * error when the node knows no such block. Rejects as ChainRuntime.call does.
 */
async function askedEnds(chain: ChainRuntime, wide: WideLogs, signal: AbortSignal): Promise<{ from: number; to: number } | string> {
  const ends = { from: wide.from, to: wide.to };
  for (const end of ['from', 'to'] as const) {
    const tag = wide.filter[end === 'from' ? 'fromBlock' : 'toBlock'];
    if (!ASKED_TAGS.has(tag)) continue;
    const block = (await chain.call('eth_getBlockByNumber', [tag, false], signal)) as { number?: unknown } | null;
    if (block === null || !isQuantity(block.number)) return `${String(tag)} block not found`;
    ends[end] = Number(block.number);
  }
  return ends;
}
