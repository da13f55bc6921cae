/**
 * The filter methods (the catalogue rows with MethodRow.filter), answered by the gateway from the chain's
 * own filters (ChainRuntime.filters, src/chain/filters.ts), so a filter outlives the node it was made on.
 * Filters belong to the caller's limit key (`ep:<endpoint id>`, or `ip:<address>` on the public path).
 */
import { rpcCustomErrorBody } from '../errors.js';
import { filterError, isFilterError } from '../filters/filter-registry.js';
import type { GatewayContext } from './context.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { NodeRpcError } from '../upstreams/rpc-call.js';
import { type Caller, settleCall } from './admission.js';
import type { Local, PlannedAnswer } from './plan.js';
import { errorText } from '../log.js';
import { failedCallAnswer, settleUpstreamFailure } from './upstream-failures.js';

const TOO_MANY = filterError('too many filters');

/**
 * Answers one admitted filter call and settles its metering: a result or a node-like -32000 refusal
 * is charged; 'too many filters' (a limit) is not; a node's own error for the eth_getLogs behind a
 * poll is passed on, charged; an upstream failure is refunded and answered as a forwarded call's
 * (upstream-failures.ts). Never rejects.
 */
export async function answerFilterCall(ctx: GatewayContext, chain: ChainRuntime, caller: Caller, call: Local): Promise<PlannedAnswer> {
  const t = ctx.tenancy;
  const charged = (answer: string): PlannedAnswer => {
    settleCall(t, caller, call.method, call.admission, { ok: true, bytes: answer.length });
    return { answer, outcome: 'ok' };
  };
  try {
    const r = await chain.filters.call(caller.limitKey, call.method, call.params);
    if (isFilterError(r)) {
      const answer = rpcCustomErrorBody(r.code, call.idText, r.message);
      if (r !== TOO_MANY) return charged(answer);
      // The node-like -32000 of a gateway limit the error table has no row for: kept as its code.
      settleCall(t, caller, call.method, call.admission, { ok: false, status: r.code, code: null });
      return { answer, outcome: 'ok' };
    }
    return charged(`{"jsonrpc":"2.0","id":${call.idText},"result":${JSON.stringify(r)}}`);
  } catch (err) {
    if (err instanceof NodeRpcError) return charged(rpcCustomErrorBody(err.code, call.idText, err.message));
    const reason = errorText(err);
    ctx.log.warn('a filter call could not read the chain', { chain: chain.config.slug, method: call.method, reason });
    // The node that failed is not known here (the filter's reads pick their own, chain/filters.ts): none is named.
    settleUpstreamFailure(ctx, caller, call, reason, undefined);
    const failed = failedCallAnswer(reason, call.idText);
    return { answer: failed.body, outcome: failed.code };
  }
}
