/** What the pipeline does with a call no node answered: the log line of the node's failure, and the refund. */
import { type ErrorCode, ERRORS, rpcErrorBody } from '../errors.js';
import { FAILED_CHECK_REASON } from '../chain/answer-checks.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { type Caller, settleCall } from './admission.js';
import type { GatewayContext } from './context.js';
import { NO_BUDGET_REASON, NO_UPSTREAM_LABEL, WRONG_ID_REASON } from './forward.js';
import type { Forward } from './plan.js';
import { quorumFailure } from './quorum-failures.js';

/**
 * One failed upstream call: every failure counts, but a node that fails every call is not a log line per call.
 * Answers that are other calls' (WRONG_ID_REASON, which reaches here through shared calls as the failure kind
 * does not) are a condition of their own: a node or a balancer in front of it mixes up answers, which an
 * operator must hear of even while the node also fails otherwise.
 */
export function logUpstreamFailure(ctx: GatewayContext, chain: ChainRuntime, upstreamLabel: string, reason: string): void {
  const slug = chain.config.slug;
  const fields = { chain: slug, upstream: upstreamLabel };
  // The nodes that disagreed are logged one by one where the quorum compares them (quorum-call.ts).
  if (quorumFailure(reason) !== null)
    ctx.upstreamFailures.report(`${slug} quorum`, 'calls asked of several nodes get no agreed answer', fields, { reason });
  else if (reason === WRONG_ID_REASON)
    ctx.upstreamFailures.report(`${slug} ${upstreamLabel} wrong_id`, "upstream answers carry other calls' ids", fields, { reason });
  else ctx.upstreamFailures.report(`${slug} ${upstreamLabel}`, 'upstream calls fail', fields, { reason });
}

/**
 * A forwarded call that no node answered: refunded and counted with the status of the code it is answered with
 * (a 502, or 503 for upstream_budget), and as a refusal when no node was in rotation to try.
 */
export function settleUpstreamFailure(
  ctx: GatewayContext,
  caller: Caller,
  f: Pick<Forward, 'method' | 'admission'>,
  reason: string,
  failedUpstream: string | undefined,
): void {
  if (failedUpstream === NO_UPSTREAM_LABEL) caller.tally.refused('no_upstream');
  // The code the client is answered with (failedCallAnswer's), for the call's span and the owner's failures.
  const code = failedCallCode(reason);
  // The node's name for the owner's recent failures, when a node failed it (not when none was in rotation).
  const node = failedUpstream === undefined || failedUpstream === NO_UPSTREAM_LABEL ? {} : { upstream: failedUpstream };
  settleCall(ctx.tenancy, caller, f.method, f.admission, { ok: false, status: ERRORS[code].http, reason, code, ...node });
}

/**
 * What the client is answered for a forwarded call that failed before any byte of it was sent, by its reason
 * (failedCallCode), with the quorum's message for no_quorum (quorum-failures.ts says what was missing).
 */
export function failedCallAnswer(reason: string, idText: string): { code: ErrorCode; body: string } {
  const code = failedCallCode(reason);
  return { code, body: rpcErrorBody(code, idText, code === 'no_quorum' ? quorumFailure(reason)?.message : undefined) };
}

/**
 * The error table's row of a forwarded call that failed, by its reason: no_quorum when the nodes asked to agree
 * did not, upstream_answer_invalid when the last answer failed the gateway's checks (chain/answer-checks.ts; the
 * reason survives shared calls, as a failure kind does not), upstream_budget when every node was at its budget,
 * else upstream_error. One mapping, so the answer and the failure recorded of it cannot disagree.
 */
function failedCallCode(reason: string): ErrorCode {
  if (reason === FAILED_CHECK_REASON) return 'upstream_answer_invalid';
  if (reason === NO_BUDGET_REASON) return 'upstream_budget';
  return quorumFailure(reason) === null ? 'upstream_error' : 'no_quorum';
}
