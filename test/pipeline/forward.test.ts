/**
 * The calls forwardCall writes to a node: the client's id never reaches it, the gateway's ids run in turn
 * through GATEWAY_IDS texts made once (fresh text per call was promoted by V8 under load: see forward.ts).
 */
import t from 'tap';
import { methodRow } from '../../src/jsonrpc/methods.js';
import { forwardCall, GATEWAY_IDS, type AnswerSink } from '../../src/pipeline/forward.js';
import type { HttpUpstream, RequestHandle, UpstreamRequest } from '../../src/upstreams/http-client.js';

/** A node that records each call's body and never answers. */
function recorder(): HttpUpstream & { bodies: string[] } {
  const bodies: string[] = [];
  return {
    label: 'recorder',
    bodies,
    request(req: UpstreamRequest): RequestHandle {
      bodies.push(String(req.body));
      return { abort() {}, resume() {}, distrust() {} };
    },
    stats: () => ({ open: 0, busy: 0, queued: 0 }),
    close() {},
  };
}

const sink: AnswerSink = { whole() {}, begin() {}, chunk: () => true, end() {}, fail() {} };

t.test('the gateway ids run 1..GATEWAY_IDS in turn, the client id stays home', async (t) => {
  const node = recorder();
  for (let i = 0; i < 2 * GATEWAY_IDS + 1; i++)
    forwardCall(node, 1000, methodRow('eth_getBalance')!, '["0x01","latest"]', '"client-7"', sink);
  const calls = node.bodies.map((b) => JSON.parse(b) as { jsonrpc: string; id: unknown; method: string; params: unknown });
  t.same(calls[0], { jsonrpc: '2.0', id: calls[0]!.id, method: 'eth_getBalance', params: ['0x01', 'latest'] });
  t.notOk(
    node.bodies.some((b) => b.includes('client-7')),
    "the client's id never reaches the node",
  );
  const ids = calls.map((c) => c.id as number);
  t.ok(
    ids.every((id) => Number.isInteger(id) && id >= 1 && id <= GATEWAY_IDS),
    'every id is an integer in 1..GATEWAY_IDS',
  );
  t.equal(new Set(ids.slice(0, GATEWAY_IDS)).size, GATEWAY_IDS, 'GATEWAY_IDS calls in a row carry different ids');
  for (let i = 1; i < ids.length; i++) {
    if (ids[i] !== (ids[i - 1]! % GATEWAY_IDS) + 1) t.fail(`call ${i} has id ${ids[i]} after ${ids[i - 1]}`);
  }
  t.equal(ids[GATEWAY_IDS], ids[0], 'and then they start again');
});
