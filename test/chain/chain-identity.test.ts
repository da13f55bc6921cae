import t from 'tap';
import { createChainIdentity } from '../../src/chain/chain-identity.js';
import { noMetrics } from '../../src/metrics/registry.js';
import type { HttpUpstream } from '../../src/upstreams/http-client.js';
import { createChainHealth, type ChainHealth } from '../../src/upstreams/selection.js';

/** A chain of `n` nodes whose identities are what `said` holds (by index) when read; the clock is `clock.now`. */
function setup(n: number, chainId: number | undefined, recheckMs = 60_000) {
  const clock = { now: 1_000 };
  const health = createChainHealth(
    Array.from({ length: n }, (_, i) => `n${i}`),
    { maxLagBlocks: 5, now: () => clock.now },
  );
  const upstreams = Array.from({ length: n }, (_, i) => ({ index: i }) as unknown as HttpUpstream);
  const said: Array<string | null | Error> = Array.from({ length: n }, () => null);
  const logged: string[] = [];
  const verdicts: Array<[number, boolean]> = [];
  const identity = createChainIdentity({
    chainId,
    health,
    upstreams,
    names: upstreams.map((_, i) => `n${i}`),
    read: async (u) => {
      const v = said[(u as unknown as { index: number }).index]!;
      if (v instanceof Error) throw v;
      return v;
    },
    metrics: noMetrics().chain('c'),
    log: (level, msg, f) => logged.push(`${level} ${msg} ${f.upstream} ${f.served}`),
    onVerdict: (i, w) => verdicts.push([i, w]),
    recheckMs,
  });
  const check = (i: number): Promise<void> => identity.check(i);
  return { clock, health, said, logged, verdicts, identity, check };
}

const out = (h: ChainHealth): number[] => [0, 1, 2].filter((i) => h.upstreams[i] !== undefined && !h.healthyIndices().includes(i));

t.test('evm: a node naming another chain id is out until it names the configured one; no answer is no verdict', async (t) => {
  const { health, said, logged, check, verdicts } = setup(2, 1);
  said[0] = '31337';
  said[1] = '1';
  await check(0);
  await check(1);
  t.same(out(health), [0]);
  t.equal(health.upstreams[0]!.status().reason, 'wrong_chain');
  await check(0);
  t.same(logged, ['warn upstream serves another chain: out of rotation until it serves this one n0 31337'], 'logged once');
  said[0] = null;
  await check(0);
  t.same(out(health), [0], 'a node that no longer says stays as judged');
  said[0] = '1';
  await check(0);
  t.same(out(health), []);
  t.equal(logged.length, 2);
  t.match(logged[1], /^info upstream serves this chain again n0 1/);
  t.same(verdicts.at(-1), [0, false], 'every verdict is told, for the worker threads');
  said[1] = new Error('ECONNREFUSED');
  await check(1);
  t.same(out(health), [], 'a node that cannot be asked is given no verdict: it keeps its standing');
});

t.test('a wrong node restored from failing stays out: failing and wrong are separate', async (t) => {
  const { health, said, check } = setup(2, 1);
  said[0] = '5';
  await check(0);
  for (let k = 0; k < 3; k++) health.upstreams[0]!.record('failed', 1);
  health.upstreams[0]!.reportProbe(10, 1);
  t.equal(health.upstreams[0]!.failing, false);
  t.same(out(health), [0]);
  t.equal(health.bestHead(), null, 'its head is not the chain’s best head');
});

t.test('due: never checked, out of rotation, RECHECK_MS since the last check, or after recheckAll', async (t) => {
  const { clock, health, said, identity, check } = setup(2, 1, 60_000);
  t.equal(identity.due(0), true, 'never checked');
  said[0] = '1';
  said[1] = '2';
  await check(0);
  await check(1);
  t.equal(identity.due(0), false);
  t.equal(identity.due(1), true, 'a node on another chain is asked at every probe');
  clock.now += 59_999;
  t.equal(identity.due(0), false);
  clock.now += 1;
  t.equal(identity.due(0), true, 'checked again every recheckMs');
  await check(0);
  for (let k = 0; k < 3; k++) health.upstreams[0]!.record('failed', 1);
  t.equal(identity.due(0), true, 'a failing node is checked before it comes back');
  health.upstreams[0]!.reportProbe(1, 1);
  await check(0);
  t.equal(identity.due(0), false);
  identity.recheckAll();
  t.equal(identity.due(0), true, 'a reload checks every node again');
});

t.test('beacon: the genesis most nodes name wins; on a tie the first configured', async (t) => {
  const { health, said, check, identity } = setup(3, undefined);
  said[0] = 'other';
  said[1] = 'main';
  said[2] = 'main';
  await check(0);
  t.same(out(health), [], 'one node alone is its own reference');
  await check(1);
  t.same(out(health), [1], 'a tie: the first configured node’s genesis');
  await check(2);
  t.same(out(health), [0], 'two against one: the lone node is out');
  t.equal(identity.served(0), 'other');
});

t.test('a chain of one beacon node never judges it wrong', async (t) => {
  const { health, said, check } = setup(1, undefined);
  said[0] = 'anything';
  await check(0);
  t.same(health.healthyIndices(), [0]);
});

t.test('admit: a failing node comes back only once a check started since it failed has answered', async (t) => {
  const { clock, health, said, identity, check } = setup(2, 1);
  const signal = new AbortController().signal;
  said[0] = '1';
  await check(0);
  await identity.admit(0, signal);
  clock.now += 10;
  for (let k = 0; k < 3; k++) health.upstreams[0]!.record('failed', 1);
  t.equal(health.upstreams[0]!.failing, true);
  said[0] = new Error('ECONNREFUSED');
  await t.rejects(identity.admit(0, signal), /not known since it failed/, 'a check that fails is no answer: not yet');
  said[0] = '5';
  await identity.admit(0, signal);
  t.same(out(health), [0], 'admitted once judged: the verdict keeps it out');
  t.equal(identity.due(0), true, 'still failing: checked again at its next probe');
  said[0] = '1';
  await check(0);
  await identity.admit(0, signal);
  health.upstreams[0]!.reportProbe(7, 1);
  t.same(out(health), [], 'and back once it serves the configured chain and reads a head');
});

/** One node of chain 1 whose checks answer only when the test resolves them (pending, in order), each read's
 *  timeout kept in `timeouts`. */
function heldChecks() {
  const clock = { now: 1_000 };
  const health = createChainHealth(['a'], { maxLagBlocks: 5, now: () => clock.now });
  const timeouts: number[] = [];
  const pending: Array<(v: string | null) => void> = [];
  const identity = createChainIdentity({
    chainId: 1,
    health,
    upstreams: [{} as HttpUpstream],
    names: ['a'],
    read: (_u, timeoutMs) => {
      timeouts.push(timeoutMs);
      return new Promise((resolve) => pending.push(resolve));
    },
    metrics: noMetrics().chain('c'),
    checkTimeoutMs: 7_000,
  });
  return { clock, health, timeouts, pending, identity };
}

t.test('a check has its own timeout, one in flight per node, and the wait for it ends with the probe', async (t) => {
  const { clock, health, timeouts, pending, identity } = heldChecks();
  void identity.check(0);
  t.equal(identity.due(0), false, 'not due while one is in flight');
  void identity.check(0);
  t.same(timeouts, [7_000], 'a second check joins the one in flight; the check has its own timeout');
  clock.now += 10;
  for (let k = 0; k < 3; k++) health.upstreams[0]!.record('failed', 1);
  const probe = new AbortController();
  const waiting = identity.admit(0, probe.signal);
  probe.abort();
  await t.rejects(waiting, /aborted/, 'a probe given up stops waiting');
  const next = identity.admit(0, new AbortController().signal);
  pending[0]!('1');
  await new Promise((r) => setImmediate(r));
  t.equal(timeouts.length, 2, 'the check in flight started before the node failed: another is made after it');
  pending[1]!('1');
  await next;
  identity.close();
});

t.test('a reload while a check is in flight asks again after it', async (t) => {
  const { pending, identity } = heldChecks();
  const first = identity.check(0);
  identity.recheckAll();
  pending[0]!('1');
  await first;
  t.equal(identity.due(0), true, 'the check that started before the reload does not count');
  const second = identity.check(0);
  pending[1]!('1');
  await second;
  t.equal(identity.due(0), false);
});
