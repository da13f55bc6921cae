/**
 * The one road from a call to a chain's nodes (chain/attempts.ts): which node each attempt goes to under each
 * retry rule, the deadline a second attempt needs, and how attempts count in the nodes' health. Over a real
 * ChainHealth driven by a test clock.
 */
import t from 'tap';
import { Attempts, isRpcError, mentionsError, NO_RETRY, NodeAttempt, RETRY_ONCE, RETRY_WITHIN_DEADLINE } from '../../src/chain/attempts.js';
import { createChainHealth } from '../../src/upstreams/selection.js';

function healthOf(n: number) {
  const clock = { now: 1_000 };
  const health = createChainHealth(
    Array.from({ length: n }, (_, i) => `node${i}`),
    { maxLagBlocks: 10, now: () => clock.now },
  );
  return { clock, health };
}

t.test('a second attempt only under a rule that allows one, never on the first node, at most one', async (t) => {
  const { health } = healthOf(2);
  const once = new Attempts(health, 1_000, RETRY_WITHIN_DEADLINE);
  const first = once.nextNode();
  t.not(first, null);
  once.hold(new NodeAttempt(health, first!));
  t.equal(once.nextNode(), 1 - first!, 'the other node');
  once.hold(new NodeAttempt(health, 1 - first!));
  t.equal(once.nextNode(), null, 'never a third');

  const never = new Attempts(health, 1_000, NO_RETRY);
  never.hold(new NodeAttempt(health, never.nextNode()!));
  t.equal(never.nextNode(), null, 'NO_RETRY: no second attempt');

  const alone = healthOf(1);
  const one = new Attempts(alone.health, 1_000, RETRY_ONCE);
  one.hold(new NodeAttempt(alone.health, one.nextNode()!));
  t.equal(one.nextNode(), null, 'no other node in rotation');
});

t.test('a shared deadline: the second attempt gets what is left, and none under minLeftMs; RETRY_ONCE has its own timeout', async (t) => {
  const { clock, health } = healthOf(2);
  const shared = new Attempts(health, 1_000, RETRY_WITHIN_DEADLINE);
  shared.hold(new NodeAttempt(health, shared.nextNode()!));
  t.equal(shared.attemptTimeoutMs(), 1_000);
  clock.now += 850;
  t.equal(shared.attemptTimeoutMs(), 150, 'the rest of the deadline');
  t.not(shared.nextNode(), null, `${RETRY_WITHIN_DEADLINE.minLeftMs} ms or more left: another node`);
  clock.now += 51;
  t.equal(shared.nextNode(), null, `under ${RETRY_WITHIN_DEADLINE.minLeftMs} ms left: none`);
  clock.now += 1_000;
  t.equal(shared.attemptTimeoutMs(), 1, 'never below 1 ms');

  const own = new Attempts(health, 1_000, RETRY_ONCE);
  own.hold(new NodeAttempt(health, own.nextNode()!));
  clock.now += 5_000;
  t.not(own.nextNode(), null, 'RETRY_ONCE: the deadline does not bar the second attempt');
  t.equal(own.attemptTimeoutMs(), 1_000, 'which gets the whole timeout');
});

t.test('health: in flight from the making, one outcome counted, a dropped attempt counts none', async (t) => {
  const { clock, health } = healthOf(1);
  const u = health.upstreams[0]!;
  const a = new NodeAttempt(health, 0);
  const b = new NodeAttempt(health, 0);
  t.equal(u.inflight, 2);
  clock.now += 40;
  a.settle('failed');
  a.settle('ok');
  b.drop();
  b.settle('failed');
  t.equal(u.inflight, 0);
  t.equal(u.status().calls, 1, 'one outcome counted');
  t.equal(u.status().errorRate, 1, 'the first one given');
});

t.test('isRpcError and mentionsError read bytes as the string searches they replace did', async (t) => {
  // The searches they replace: `"error"` before any `"result"` in the first 256 bytes, and `"error"` anywhere.
  const errorFirst = (body: Buffer): boolean => {
    const head = body.subarray(0, 256);
    const e = head.indexOf('"error"');
    const r = head.indexOf('"result"');
    return e >= 0 && (r < 0 || r > e);
  };
  const pad = (n: number): string => 'x'.repeat(n);
  const bodies = [
    '{"jsonrpc":"2.0","id":1,"result":"0x1b4"}',
    '{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}',
    '{"jsonrpc":"2.0","id":1,"result":{"error":"inside"}}',
    '{"error":{"code":1},"result":null}',
    '{"jsonrpc":"2.0","id":1,"result":"error"}',
    '{"jsonrpc":"2.0","id":1,"result":"\\"error"}',
    `{"jsonrpc":"2.0","id":"${pad(230)}","error":{"code":1}}`,
    `{"jsonrpc":"2.0","id":"${pad(240)}","error":{"code":1}}`,
    `{"jsonrpc":"2.0","id":"${pad(600)}","error":{"code":1}}`,
    `{"jsonrpc":"2.0","id":"${pad(600)}","result":1}`,
    '"error',
    '',
  ];
  for (const text of bodies) {
    const body = Buffer.from(text);
    t.equal(isRpcError(body), errorFirst(body), `isRpcError ${text.slice(0, 50)}`);
    t.equal(mentionsError(body), body.includes('"error"'), `mentionsError ${text.slice(0, 50)}`);
  }
});

t.test('a minimum head: both attempts on nodes that reached it; a second may ask more, or for none short of it', async (t) => {
  const { health } = healthOf(3);
  health.upstreams[0]!.reportHead(100);
  health.upstreams[1]!.reportHead(98);
  health.upstreams[2]!.reportHead(100);
  const tries = new Attempts(health, 1_000, RETRY_WITHIN_DEADLINE, null, 100);
  t.equal(tries.minHead, 100);
  const first = tries.nextNode()!;
  t.ok(first === 0 || first === 2, `the first on a node at 100 (${first})`);
  tries.hold(new NodeAttempt(health, first));
  t.equal(tries.nextNode(), 2 - first, 'a second on the other node at 100');
  t.equal(tries.nextNode(101, 'none'), null, 'none ahead of 100: no second');
  t.equal(tries.nextNode(101), 2 - first, 'or the highest left (100, not 98), when the call would rather have an answer');
  t.equal(tries.nextNode(99, 'none'), 2 - first);
});
