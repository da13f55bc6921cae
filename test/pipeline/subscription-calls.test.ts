/**
 * The limits on what a caller holds open (pipeline/stream-limits.ts) and eth_subscribe's limit and metering
 * (pipeline/subscription-calls.ts), decided in the pipeline for the server to write: the refusals' texts and
 * the usage rows they leave.
 */
import t from 'tap';
import { admitConnection, createConnectionCounts } from '../../src/pipeline/stream-limits.js';
import { type SubscribingConn, subscriptionCall } from '../../src/pipeline/subscription-calls.js';
import type { SubscriptionHub } from '../../src/fanout/subscriptions.js';
import { admitCost } from '../../src/pipeline/admission.js';
import { keyedCaller, pipelineContext, publicCaller, usageRows } from '../support/pipeline-context.js';

const CHAIN = { devnet: { chain_id: 31337, upstreams: [{ url: 'http://127.0.0.1:1' }] } };

t.test('connections: counted per key or per IP, refused at the limit naming it', async (t) => {
  const s = pipelineContext(t, { chains: CHAIN, sse: { max_connections_per_ip: 1, max_connections_per_key: 2 } });
  const counts = createConnectionCounts();
  const pub = publicCaller(s);
  const first = admitConnection(counts, pub, s.ctx.config.sse, 'sse', 'event streams');
  t.same(first, { countKey: 'ip:192.0.2.1', limit: 1, refusal: null });
  counts.open(first.countKey);
  t.same(
    admitConnection(counts, pub, s.ctx.config.sse, 'sse', 'event streams').refusal,
    'Too many open event streams: the limit is 1 (sse.max_connections_per_ip)',
  );
  const { caller } = keyedCaller(s, 'devnet');
  const keyed = admitConnection(counts, caller, s.ctx.config.sse, 'sse', 'event streams');
  t.equal(keyed.countKey, `ep:${caller.auth!.endpointId}`);
  counts.open(keyed.countKey);
  counts.open(keyed.countKey);
  t.equal(
    admitConnection(counts, caller, s.ctx.config.websocket, 'websocket', 'WebSocket connections').refusal,
    null,
    "another kind's limit",
  );
  t.equal(
    admitConnection(counts, caller, s.ctx.config.sse, 'sse', 'event streams').refusal,
    'Too many open event streams: the limit is 2 (sse.max_connections_per_key)',
  );
  counts.close(keyed.countKey);
  t.ok(counts.tryOpen(keyed.countKey, 2), 'tryOpen takes the free place');
  t.notOk(counts.tryOpen(keyed.countKey, 2), 'and refuses the next, in one step');
  counts.close(keyed.countKey);
  t.equal(admitConnection(counts, caller, s.ctx.config.sse, 'sse', 'event streams').refusal, null, 'one closed, one more allowed');
});

t.test('eth_subscribe: refused at websocket.max_subscriptions_per_connection, waiting ones counted, no RU taken', async (t) => {
  const s = pipelineContext(t, { chains: CHAIN, websocket: { max_subscriptions_per_connection: 2 } });
  const { caller, ownerId } = keyedCaller(s, 'devnet');
  const subscribed: string[] = [];
  const hub = {
    subscribe: (_conn: unknown, kind: string) => {
      subscribed.push(kind);
      return { ok: true, id: '0x1' };
    },
  } as unknown as SubscriptionHub;
  const conn = {
    caller,
    ownerId,
    endpointId: caller.auth!.endpointId,
    closed: false,
    firstSubId: '0xa',
    firstSub: null,
    moreSubs: null,
    waitingSubscribes: 1,
  } as unknown as SubscribingConn;
  const admission = admitCost(s.ctx.tenancy, caller, 'eth_subscribe');
  if (!admission.ok) throw new Error('not admitted');
  const answers: string[] = [];
  subscriptionCall(s.ctx, conn, hub, 'devnet', { method: 'eth_subscribe', params: ['newHeads'], idText: '7', admission }, (a) =>
    answers.push(a),
  );
  t.same(subscribed, [], 'the hub was not asked');
  t.match(answers[0], /"id":7,"error":\{"code":-32005,"message":"Too many subscriptions on this connection: the limit is 2/);
  t.match(usageRows(s), [{ owner_id: ownerId, method: 'eth_subscribe', status: 429, ru: 0 }]);
  conn.waitingSubscribes = 0;
  const again = admitCost(s.ctx.tenancy, caller, 'eth_subscribe');
  if (!again.ok) throw new Error('not admitted');
  subscriptionCall(s.ctx, conn, hub, 'devnet', { method: 'eth_subscribe', params: ['newHeads'], idText: '8', admission: again }, (a) =>
    answers.push(a),
  );
  t.same(subscribed, ['newHeads'], 'under the limit the hub subscribes');
  t.equal(answers[1], '{"jsonrpc":"2.0","id":8,"result":"0x1"}');
});

t.test("eth_subscribe: a refusal is kept in the owner's failures under the row it was answered with", async (t) => {
  const s = pipelineContext(t, { chains: CHAIN, websocket: { max_subscriptions_per_connection: 2 } });
  const { caller, ownerId } = keyedCaller(s, 'devnet');
  const hub = {
    // A resume point out of reach (fanout/replay.ts): the client's params refused.
    subscribe: () => ({ ok: false, invalid: true, reason: 'the resume point is out of reach' }),
  } as unknown as SubscriptionHub;
  const conn = { caller, ownerId, endpointId: caller.auth!.endpointId, closed: false, waitingSubscribes: 0 } as unknown as SubscribingConn;
  const answers: string[] = [];
  const call = (hubOf: SubscriptionHub | null, idText: string): void => {
    const admission = admitCost(s.ctx.tenancy, caller, 'eth_subscribe');
    if (!admission.ok) throw new Error('not admitted');
    subscriptionCall(s.ctx, conn, hubOf, 'devnet', { method: 'eth_subscribe', params: ['logs'], idText, admission }, (a) =>
      answers.push(a),
    );
  };
  call(hub, '1');
  call(null, '2');
  t.match(answers[0], /"id":1,"error":\{"code":-32602,/);
  if (!s.ctx.tenancy.ledger.flush()) throw new Error('the ledger flush failed');
  const kept = await s.ctx.tenancy.accounts.failures(ownerId, caller.auth!.endpointId, 10);
  t.same(
    kept.map((f) => [f.http_status, f.error]).reverse(),
    [
      [200, 'invalid_params'],
      [200, 'method_not_found'],
    ],
    'a JSON-RPC error over the WebSocket, each under its row',
  );
});
