/**
 * eth_subscribe and eth_unsubscribe on a WebSocket: answered by the chain's subscription hub, within the
 * per-connection limit, and metered like any call. The server hands the hub and writes the answer it is given.
 */
import { ERRORS, type ErrorCode, rpcCustomErrorBody, rpcErrorBody } from '../errors.js';
import type { FeedKind } from '../fanout/feeds.js';
import { type SubscribeOutcome, type SubscriberConn, subscriptionCount, type SubscriptionHub } from '../fanout/subscriptions.js';
import { type Caller, settleCall } from './admission.js';
import type { GatewayContext } from './context.js';
import { type Local, resultBody } from './plan.js';

/** A connection that subscribes: its caller, and its eth_subscribe calls still waiting for their upstream
 *  subscription (they count against websocket.max_subscriptions_per_connection). */
export interface SubscribingConn extends SubscriberConn {
  readonly caller: Caller;
  waitingSubscribes: number;
}

/**
 * Answers one eth_subscribe or eth_unsubscribe; `done` may run in a later turn (see subscribeAnswer). `hub` is
 * the chain's, null when no upstream of chain `slug` has a ws URL.
 */
export function subscriptionCall(
  ctx: GatewayContext,
  conn: SubscribingConn,
  hub: SubscriptionHub | null,
  slug: string,
  local: Local,
  done: (answer: string, outcome: ErrorCode | 'ok') => void,
): void {
  const t = ctx.tenancy;
  const { caller } = conn;
  if (local.method === 'eth_unsubscribe') {
    const ok = hub?.unsubscribe(conn, String(local.params[0]));
    const answer = resultBody(local.idText, ok ? 'true' : 'false');
    settleCall(t, caller, local.method, local.admission, { ok: true, bytes: answer.length });
    done(answer, 'ok');
    return;
  }
  if (hub === null) {
    settleCall(t, caller, local.method, local.admission, {
      ok: false,
      status: 404,
      http: ERRORS.method_not_found.http,
      code: 'method_not_found',
    });
    const message = `Subscriptions are not available on chain '${slug}': none of its upstreams has a ws URL (chains.${slug}.upstreams[].ws)`;
    done(rpcErrorBody('method_not_found', local.idText, message), 'method_not_found');
    return;
  }
  const max = ctx.config.websocket.max_subscriptions_per_connection;
  if (subscriptionCount(conn) + conn.waitingSubscribes >= max) {
    settleCall(t, caller, local.method, local.admission, { ok: false, status: 429, code: 'rate_limited' });
    const message = `Too many subscriptions on this connection: the limit is ${max} (websocket.max_subscriptions_per_connection)`;
    done(rpcCustomErrorBody(ERRORS.rate_limited.rpc, local.idText, message), 'ok');
    return;
  }
  const outcome = hub.subscribe(conn, local.params[0] as FeedKind, local.params[1]);
  if (!(outcome instanceof Promise)) {
    done(subscribeAnswer(ctx, conn, local, outcome), outcome.ok || !outcome.invalid ? 'ok' : 'invalid_params');
    return;
  }
  conn.waitingSubscribes++;
  void outcome.then((o) => {
    conn.waitingSubscribes--;
    const answer = subscribeAnswer(ctx, conn, local, o);
    done(answer, o.ok ? 'ok' : o.invalid ? 'invalid_params' : 'upstream_error');
    // A resuming subscription's replay goes out after its id.
    if (o.ok) o.start?.();
  });
}

/**
 * The answer to an eth_subscribe, settled: its id, or, when no upstream subscription could be opened
 * (the chain's upstream WebSockets unreachable, timeout_s passed, the node refused), the upstream error
 * with the request's id and no RU taken, so the client's retry logic runs instead of waiting on an id
 * that would never deliver.
 */
function subscribeAnswer(ctx: GatewayContext, conn: SubscribingConn, local: Local, outcome: SubscribeOutcome): string {
  if (outcome.ok) {
    const answer = resultBody(local.idText, `"${outcome.id}"`);
    settleCall(ctx.tenancy, conn.caller, local.method, local.admission, { ok: true, bytes: answer.length });
    return answer;
  }
  if (outcome.invalid === true) {
    // A resume point out of reach (replay.ts): the client's params, refused with no RU taken.
    settleCall(ctx.tenancy, conn.caller, local.method, local.admission, {
      ok: false,
      status: 400,
      http: ERRORS.invalid_params.http,
      code: 'invalid_params',
    });
    return rpcErrorBody('invalid_params', local.idText, outcome.reason);
  }
  settleCall(ctx.tenancy, conn.caller, local.method, local.admission, {
    ok: false,
    status: ERRORS.upstream_error.http,
    reason: outcome.reason,
    code: 'upstream_error',
  });
  return rpcErrorBody('upstream_error', local.idText, `${ERRORS.upstream_error.message}: ${outcome.reason}`);
}
