import { type ErrorCode, ERRORS, rpcErrorBody, rpcErrorBodyFor } from '../errors.js';
import { checkLogRange, checkTraceRange } from '../jsonrpc/log-range.js';
import { type CallCheck, checkCall, type MethodRow } from '../jsonrpc/methods.js';
import { type CallRefusal, fenceCall, fenceMethod } from './request-fences.js';
import type { ParsedItem } from '../jsonrpc/parse.js';
import type { GatewayContext } from './context.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { abandonCall, type Admission, admitCost, type Caller, countRefusal, settleCall, takeRequest } from './admission.js';
import { answerFilterCall } from './filter-calls.js';
import { sentTransactionWatch } from './tx-watching.js';
import { methodRefusal } from './method-gate.js';
import { takeMethodLimit } from './method-limits.js';
import type { AnswerSink, ForwardCall } from './forward.js';
import { sharedCall } from './shared-call.js';
import { tracing } from './tracing.js';
import { splitLogsPlan, wideLogRange } from './split-logs.js';
import { failedCallAnswer, logUpstreamFailure, settleUpstreamFailure } from './upstream-failures.js';

export { failedCallAnswer, logUpstreamFailure, settleUpstreamFailure } from './upstream-failures.js';

export function resultBody(idText: string, resultJson: string): string {
  return `{"jsonrpc":"2.0","id":${idText},"result":${resultJson}}`;
}

/** A call the gateway forwards: its catalogue row, its normalized params and the RU set aside for it. */
export interface Forward {
  method: string;
  /** The method's catalogue row: every later step reads the method's traits here, never by name. */
  row: MethodRow;
  params: unknown[];
  /** `params` as JSON text: the client's own when unchanged by the checks, any whitespace it had kept. */
  paramsJson: string;
  idText: string;
  admission: Extract<Admission, { ok: true }>;
  /** eth_sendRawTransaction: starts the watch of the transaction a node accepted (tx-watching.ts); null: none. */
  watch: ((hash: string) => void) | null;
}

/** A call the gateway answers itself once admitted: a subscription call over a WebSocket, a filter call. */
export interface Local {
  method: string;
  params: unknown[];
  idText: string;
  admission: Extract<Admission, { ok: true }>;
}

/** An answer the gateway gives itself, with how it ended (for the batch's status and the hammering count). */
export interface PlannedAnswer {
  answer: string | Buffer;
  outcome: ErrorCode | 'ok';
}

/**
 * One item's fate before any upstream call: an answer the gateway gives itself (now, or `pending`
 * when it needs the chain first, as the gateway's filters and a split eth_getLogs do; metering is
 * settled before it resolves, and it never rejects), a call to forward, or a WebSocket-local call.
 * A pending answer with a `call` stops when that call is aborted (its client went away), and then
 * never resolves: the transport aborts it as it aborts its forwarded calls, and stops waiting.
 * Told apart by `kind`, which a transport reads with an exhaustive switch.
 */
export type ItemPlan =
  | { kind: 'answer'; answer: string; outcome: ErrorCode | 'ok'; retryAfterMs?: number }
  | { kind: 'pending'; pending: Promise<PlannedAnswer>; call?: ForwardCall }
  | { kind: 'forward'; forward: Forward }
  | { kind: 'local'; local: Local };

export type Transport = 'http' | 'ws';

/**
 * Why a call that passed its method's rules is still refused before it costs anything: an
 * eth_getLogs or eth_newFilter range over the chain's max_logs_block_range (never forwarded; an
 * eth_getLogs that split-logs.ts splits does not come here), and a
 * pending-transaction filter of full transactions, which the gateway's filters do not keep.
 */
function refusalOf(chain: ChainRuntime, method: string, params: unknown[]): string | undefined {
  if (method === 'eth_getLogs' || method === 'eth_newFilter') {
    const c = chain.config;
    return checkLogRange(params[0] as Record<string, unknown>, chain.head.now(), c.max_logs_block_range, c.slug);
  }
  if (method === 'trace_filter') {
    // The node's traces of every block in the range: bounded as eth_getLogs is (never split).
    const c = chain.config;
    return checkTraceRange(params[0] as Record<string, unknown>, chain.head.now(), c.max_logs_block_range, c.slug);
  }
  if (method === 'eth_newPendingTransactionFilter' && params[0] === true) {
    return (
      "eth_newPendingTransactionFilter with fullTransactions is not served: the gateway's filters report transaction hashes; " +
      "use eth_subscribe('newPendingTransactions', true) over a WebSocket for whole transactions"
    );
  }
  return undefined;
}

/**
 * The refusal of a batch over the caller's limit, one error per item with its id, naming the limit that
 * applies (the public path's when it is the lower); null when the batch fits. HTTP and WebSocket alike.
 */
export function batchRefusal(ctx: GatewayContext, caller: Caller, items: readonly ParsedItem[]): string | null {
  if (items.length <= caller.maxBatch) return null;
  const which = caller.auth === null && caller.maxBatch < ctx.config.server.max_batch ? 'public.max_batch' : 'server.max_batch';
  const message = `Batch of ${items.length} items is larger than the limit of ${caller.maxBatch} (${which})`;
  return rpcErrorBodyFor(
    'batch_too_large',
    items.map((item) => item.idText),
    message,
  );
}

/**
 * The fixed order of checks for one item, the same over HTTP and WebSocket: rate limit (every
 * parsed item counts, valid or not) → the limit of its method, if any (method-limits.ts) → method (the catalogue, the chain's and the plan's policy:
 * method-gate.ts) → params (the log range included) → RU rate and balance (at the chain's price)
 * → answer (locally, from the gateway's filters, or window by window for a wide eth_getLogs) or forward.
 */
export function planItem(ctx: GatewayContext, chain: ChainRuntime, caller: Caller, item: ParsedItem, transport: Transport): ItemPlan {
  const t = ctx.tenancy;
  const method = item.ok ? item.method : '(invalid)';
  const taken = takeRequest(t, caller);
  if (!taken.ok) {
    const code = taken.error ?? 'rate_limited';
    countRefusal(t, caller, method, ERRORS[code].http, code);
    return { kind: 'answer', answer: rpcErrorBody(code, item.idText), outcome: code, retryAfterMs: taken.retryAfterMs };
  }
  if (!item.ok) {
    countRefusal(t, caller, method, ERRORS[item.error].rpc, item.error);
    return { kind: 'answer', answer: rpcErrorBody(item.error, item.idText, item.message), outcome: item.error };
  }
  // One look when no limits per method are set (the usual case): no lookup, no call.
  if ((caller.plan ?? ctx.config.public).method_limits !== undefined) {
    const limited = takeMethodLimit(t.limiter, ctx.config, caller, item.method);
    if (limited !== null) {
      countRefusal(t, caller, method, ERRORS.rate_limited.http, 'rate_limited');
      const answer = rpcErrorBody('rate_limited', item.idText, limited.message);
      return { kind: 'answer', answer, outcome: 'rate_limited', retryAfterMs: limited.retryAfterMs };
    }
  }
  const check =
    methodRefusal(ctx.config, chain, caller, item.method) ??
    fenceMethod(caller, item.method) ??
    checkCall(item.method, item.params, { chainId: chain.config.chain_id ?? 0, transport });
  if (check.kind === 'error') {
    countRefusal(t, caller, method, ERRORS[check.error].rpc, check.error);
    return { kind: 'answer', answer: rpcErrorBody(check.error, item.idText, check.message), outcome: check.error };
  }
  // The key's contracts, read in the validated params: a refused call costs nothing and reaches no cache or node.
  const fenced = check.kind === 'forward' ? fenceCall(caller, item.method, check.params) : undefined;
  if (fenced instanceof Promise) return fencedLater(ctx, chain, caller, item, check, transport, fenced);
  if (fenced !== undefined) return fenceAnswer(ctx, caller, item.idText, item.method, fenced);
  return planChecked(ctx, chain, caller, item, check, transport);
}

/** A call refused by its key's restrictions: counted (usage with the row's status, metrics), charged nothing. */
function fenceAnswer(ctx: GatewayContext, caller: Caller, idText: string, method: string, r: CallRefusal): ItemPlan & { kind: 'answer' } {
  countRefusal(ctx.tenancy, caller, method, ERRORS[r.error].http, r.error);
  return { kind: 'answer', answer: rpcErrorBody(r.error, idText, r.message), outcome: r.error };
}

/** What checkCall lets through: a call to answer locally or to forward. */
type PassedCheck = Exclude<CallCheck, { kind: 'error' }>;

/**
 * An item planned once its key's contract check, waiting for the transaction decoder, is in: a pending answer
 * (the rest of its plan collected whole). Stopped by its `call` like any pending answer, it then never resolves.
 */
function fencedLater(
  ctx: GatewayContext,
  chain: ChainRuntime,
  caller: Caller,
  item: Extract<ParsedItem, { ok: true }>,
  check: PassedCheck,
  transport: Transport,
  fenced: Promise<CallRefusal | undefined>,
): ItemPlan {
  let inner: ForwardCall | undefined;
  let stopped = false;
  const call: ForwardCall = {
    abort() {
      stopped = true;
      inner?.abort();
    },
    resume: () => inner?.resume(),
  };
  const never = new Promise<PlannedAnswer>(() => {});
  const pending = fenced.then((r): PlannedAnswer | Promise<PlannedAnswer> => {
    if (stopped) return never;
    if (r !== undefined) return fenceAnswer(ctx, caller, item.idText, item.method, r);
    const plan = planChecked(ctx, chain, caller, item, check, transport);
    switch (plan.kind) {
      case 'answer':
        return plan;
      case 'pending':
        inner = plan.call;
        return plan.pending;
      case 'forward':
        return new Promise<PlannedAnswer>((resolve) => {
          inner = collectCall(ctx, chain, caller, plan.forward, (answer, outcome) => resolve({ answer, outcome }));
        });
      case 'local':
        // Only eth_sendRawTransaction waits for its check, and it is never answered locally: refused, not lost.
        abandonCall(ctx.tenancy, caller, plan.local.admission);
        return { answer: rpcErrorBody('upstream_error', item.idText), outcome: 'upstream_error' };
      default:
        throw new Error(`unknown item plan ${JSON.stringify(plan satisfies never)}`);
    }
  });
  return { kind: 'pending', pending, call };
}

/** The rest of planItem once the call passed its method, params and key checks: ranges, RU, then where it goes. */
function planChecked(
  ctx: GatewayContext,
  chain: ChainRuntime,
  caller: Caller,
  item: Extract<ParsedItem, { ok: true }>,
  check: PassedCheck,
  transport: Transport,
): ItemPlan {
  const t = ctx.tenancy;
  const method = item.method;
  // A range over max_logs_block_range on a chain that splits them: one call per window, each paid (split-logs.ts).
  const wide = check.kind === 'forward' && item.method === 'eth_getLogs' ? wideLogRange(chain, caller, check.params) : null;
  const refusal = check.kind === 'forward' && wide === null ? refusalOf(chain, item.method, check.params) : undefined;
  if (refusal !== undefined) {
    countRefusal(t, caller, method, ERRORS.invalid_params.rpc, 'invalid_params');
    return { kind: 'answer', answer: rpcErrorBody('invalid_params', item.idText, refusal), outcome: 'invalid_params' };
  }
  const admission = admitCost(t, caller, item.method, chain.policy.prices, wide?.windows);
  if (!admission.ok) {
    countRefusal(t, caller, method, ERRORS[admission.error].http, admission.error);
    return {
      kind: 'answer',
      answer: rpcErrorBody(admission.error, item.idText),
      outcome: admission.error,
      ...(admission.retryAfterMs !== undefined ? { retryAfterMs: admission.retryAfterMs } : {}),
    };
  }
  if (check.kind === 'local') {
    const answer = resultBody(item.idText, check.resultJson);
    settleCall(t, caller, method, admission, { ok: true, bytes: answer.length });
    return { kind: 'answer', answer, outcome: 'ok' };
  }
  const row = check.row;
  if (transport === 'ws' && row.wsLocal) {
    return { kind: 'local', local: { method: item.method, params: check.params, idText: item.idText, admission } };
  }
  if (wide !== null) return splitLogsPlan(ctx, chain, caller, { idText: item.idText, admission, row }, wide, transport);
  if (row.filter) {
    return {
      kind: 'pending',
      pending: answerFilterCall(ctx, chain, caller, { method: item.method, params: check.params, idText: item.idText, admission }),
    };
  }
  return {
    kind: 'forward',
    forward: {
      method: item.method,
      row,
      params: check.params,
      // The client's own text when the checks left params as they came (no default filled in, nothing
      // normalized): parse validated it in place, and writing it again would cost a walk and a copy.
      paramsJson: check.params === item.params && item.paramsText !== null ? item.paramsText : JSON.stringify(check.params),
      idText: item.idText,
      admission,
      watch: row.name === 'eth_sendRawTransaction' ? sentTransactionWatch(ctx, chain, caller, check.params) : null,
    },
  };
}

export type Settle = (answer: string | Buffer, outcome: ErrorCode | 'ok') => void;

/**
 * A forwarded call whose answer is collected whole: a batch item (answered in request order) or a
 * WebSocket message. `maxBytes` bounds what one answer may hold in memory; past it the call is
 * dropped and answered with an error that names the limit.
 */
export function collectCall(
  ctx: GatewayContext,
  chain: ChainRuntime,
  caller: Caller,
  f: Forward,
  done: Settle,
  maxBytes = Infinity,
  limitName = '',
): ForwardCall {
  const t = ctx.tenancy;
  let parts: Buffer[] = [];
  let bytes = 0;
  let over = false;
  const sink: AnswerSink & { failedUpstream?: string } = {
    whole(body) {
      settleCall(t, caller, f.method, f.admission, { ok: true, bytes: body.length });
      done(body, 'ok');
    },
    begin() {},
    chunk(buf) {
      if (over) return true;
      bytes += buf.length;
      if (bytes > maxBytes) {
        over = true;
        parts = [];
        call.abort();
        settleCall(t, caller, f.method, f.admission, {
          ok: false,
          status: 502,
          reason: `the answer is larger than ${limitName}`,
          code: 'upstream_error',
        });
        done(
          rpcErrorBody(
            'upstream_error',
            f.idText,
            `The answer is larger than the limit of ${maxBytes} bytes (${limitName}); ask for less, or use HTTP, which streams`,
          ),
          'upstream_error',
        );
        return true;
      }
      parts.push(buf);
      return true;
    },
    end() {
      settleCall(t, caller, f.method, f.admission, { ok: true, bytes });
      done(Buffer.concat(parts, bytes), 'ok');
      parts = [];
    },
    fail(_started, reason) {
      logUpstreamFailure(ctx, chain, sink.failedUpstream ?? '', reason);
      settleUpstreamFailure(ctx, caller, f, reason, sink.failedUpstream);
      const failed = failedCallAnswer(reason, f.idText);
      done(failed.body, failed.code);
    },
  };
  if (tracing !== null) tracing.beginCall(f.admission, f.method, caller.tally.startedAt);
  const call = sharedCall(ctx, chain, f, sink);
  if (tracing !== null) tracing.leave();
  return {
    abort() {
      call.abort();
      abandonCall(t, caller, f.admission);
    },
    resume: () => call.resume(),
  };
}
