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
import { isRpcError } from '../chain/attempts.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { NodeRpcError } from '../upstreams/rpc-call.js';
import { type Admission, type Caller, costWithSize, settleCall } from './admission.js';
import type { GatewayContext } from './context.js';
import type { ForwardCall, RoutedSink } from './forward.js';
import type { Forward, ItemPlan, PlannedAnswer, Transport } from './plan.js';
import { sharedCall } from './shared-call.js';
import { logUpstreamFailure, settleUpstreamFailure } from './upstream-failures.js';
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

/** The plan of an admitted split eth_getLogs: its answer to come, and the call that stops it when the client goes. */
export function splitLogsPlan(
  ctx: GatewayContext,
  chain: ChainRuntime,
  caller: Caller,
  call: { idText: string; admission: Extract<Admission, { ok: true }> },
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
  return { pending: run.answer, call: run };
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
  call: { idText: string; admission: Extract<Admission, { ok: true }> },
  wide: WideLogs,
  limit: { bytes: number; name: string },
): SplitLogs {
  const t = ctx.tenancy;
  const { idText, admission } = call;
  const size = chain.config.max_logs_block_range;
  // Admission set aside the same RU for every window.
  const windowRu = admission.ru / wide.windows;
  const asking = new AbortController();
  const inFlight = new Map<number, ForwardCall>();
  // A streamed window is dropped once its bytes alone, less the envelope around its logs, pass the limit.
  const envelope = idText.length + 64;
  let items: Buffer[] = [];
  let from = wide.from;
  let to = wide.to;
  let count = 0;
  let next = 0;
  let fetched = 0;
  /** RU of the windows fetched so far, each at its own price. */
  let charged = 0;
  /** Bytes of logs held so far. */
  let held = 0;
  let stopped = false;
  let resolve!: (a: PlannedAnswer) => void;
  const answer = new Promise<PlannedAnswer>((r) => (resolve = r));

  /** Ends the call once: the windows still in flight are dropped and `answer` resolves with `planned`. */
  function stop(planned: PlannedAnswer | null): void {
    if (stopped) return;
    stopped = true;
    asking.abort();
    for (const c of inFlight.values()) c.abort();
    inFlight.clear();
    items = [];
    if (planned !== null) resolve(planned);
  }

  /** Ends with `body`, charged for the windows fetched. */
  function charge(body: string | Buffer, outcome: ErrorCode | 'ok'): void {
    settleCall(t, caller, METHOD, admission, { ok: true, bytes: body.length, ru: charged });
    stop({ answer: body, outcome });
  }

  function failUpstream(reason: string, upstream: string | undefined): void {
    logUpstreamFailure(ctx, chain, upstream ?? '', reason);
    settleUpstreamFailure(ctx, caller, { method: METHOD, admission }, reason, upstream);
    stop({ answer: rpcErrorBody('upstream_error', idText), outcome: 'upstream_error' });
  }

  function overLimit(): void {
    charge(
      rpcErrorBody(
        'invalid_params',
        idText,
        `The eth_getLogs answer is larger than the limit of ${limit.bytes} bytes (${limit.name}); narrow the block range or the filter`,
      ),
      'invalid_params',
    );
  }

  /** A window's whole answer: its logs kept in their place, or the end of the call. */
  function windowAnswered(i: number, f: Forward, body: Buffer): void {
    if (stopped) return;
    inFlight.delete(i);
    fetched++;
    charged += costWithSize(f.admission.ru, body.length);
    const result = rawResult(body);
    if (result === null) {
      // An error object is the node's answer to this window, with the client's id: the call's answer.
      if (isRpcError(body)) charge(body, 'ok');
      else failUpstream('upstream answer has no result', undefined);
      return;
    }
    const logs = arrayItems(result);
    if (logs === null) {
      failUpstream('upstream eth_getLogs result is not an array', undefined);
      return;
    }
    held += logs.length;
    if (held > limit.bytes) {
      overLimit();
      return;
    }
    items[i] = logs;
    launch();
  }

  /** The sink of window `i`: a whole answer, or one streamed in pieces (over WHOLE_ANSWER_BYTES), collected. */
  function windowSink(i: number, f: Forward): RoutedSink {
    let parts: Buffer[] = [];
    let bytes = 0;
    const sink: RoutedSink = {
      whole: (body) => windowAnswered(i, f, body),
      begin() {},
      chunk(buf) {
        if (stopped) return true;
        bytes += buf.length;
        if (held + bytes > limit.bytes + envelope) overLimit();
        else parts.push(buf);
        return true;
      },
      end() {
        const body = Buffer.concat(parts, bytes);
        parts = [];
        windowAnswered(i, f, body);
      },
      fail(_started, reason) {
        if (!stopped) failUpstream(reason, sink.failedUpstream);
      },
    };
    return sink;
  }

  function launch(): void {
    while (!stopped && inFlight.size < SPLIT_PARALLEL && next < count) {
      const i = next++;
      const params = [windowFilter(wide.filter, from, to, size, i)];
      const f: Forward = {
        method: METHOD,
        params,
        paramsJson: JSON.stringify(params),
        idText,
        admission: { ok: true, reservation: null, ru: windowRu },
      };
      // Set before the window's sink can run: a sink never runs before sharedCall returns.
      inFlight.set(i, sharedCall(ctx, chain, f, windowSink(i, f)));
    }
    if (!stopped && fetched === count) charge(mergedLogsAnswer(idText, items), 'ok');
  }

  /** Cuts from..to into windows and starts them. */
  function cut(ends: { from: number; to: number }): void {
    from = ends.from;
    to = ends.to;
    count = windowCount(from, to, size);
    launch();
  }

  const ask = [wide.filter.fromBlock, wide.filter.toBlock].some((tag) => ASKED_TAGS.has(tag));
  if (!ask) cut(wide);
  else
    void askedEnds(chain, wide, asking.signal).then(
      (ends) => {
        if (stopped) return;
        if (typeof ends === 'string') {
          settleCall(t, caller, METHOD, admission, { ok: false, status: -32000 });
          stop({ answer: rpcCustomErrorBody(-32000, idText, ends), outcome: 'ok' });
        } else cut(ends);
      },
      (err: unknown) => {
        if (stopped) return;
        if (err instanceof NodeRpcError) {
          settleCall(t, caller, METHOD, admission, { ok: false, status: err.code });
          stop({ answer: rpcCustomErrorBody(err.code, idText, err.message), outcome: 'ok' });
        } else failUpstream(errorText(err), undefined);
      },
    );

  return {
    answer,
    abort() {
      if (stopped) return;
      // The client went away: the windows fetched were the nodes' work, and are paid for.
      settleCall(t, caller, METHOD, admission, { ok: true, bytes: 0, ru: charged });
      stop(null);
    },
    resume() {},
  };
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
