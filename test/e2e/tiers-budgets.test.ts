/**
 * Node tiers and budgets end to end, on real anvils (docs/failover.md): a tier-1 provider gets no call while
 * the tier-0 node is up and every call once it is down; a provider quota of 50 rps under 200 rps of load is
 * never exceeded (the rest spill to the other node, or get 503 upstream_budget with no other node); a node
 * answering 429 with Retry-After: 1 gets no call for that second. The provider sits behind a counting relay.
 */
import t from 'tap';
import { performance } from 'node:perf_hooks';
import { countingProxy, type SeenCall } from '../support/counting-proxy.js';
import { anvilFor, gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';
import { everyStep, type Span, surelyWithin } from '../support/window-count.js';

const DEV_BALANCE = '0x21e19e0c9bab2400000';

/** An address of its own per call, so no two calls are the same read (the gateway would share them). */
const addressFor = (i: number): string => `0x${(0x100000 + i).toString(16).padStart(40, '0')}`;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One chain over `upstreams`, served by two worker threads: each has its own node choice, so the budgets are
 *  shared out between them and a cooldown told from one to the other. */
function chain(upstreams: Array<Record<string, unknown>>): Record<string, unknown> {
  return { chains: { devnet: { chain_id: 31337, upstreams } }, server: { workers: 2 } };
}

async function inRotation(g: TestGateway, name: string): Promise<boolean> {
  const health = (await send('GET', `${g.base}/healthz`)).json as {
    chains: Record<string, { upstreams: Array<{ label: string; in_rotation: boolean }> }>;
  };
  return health.chains.devnet!.upstreams.find((u) => u.label === name)?.in_rotation === true;
}

const balanceCalls = (calls: readonly SeenCall[]): SeenCall[] => calls.filter((c) => c.method === 'eth_getBalance');

t.test('a tier-1 provider gets no call while the tier-0 node is up, every call once it is down', async (t) => {
  const own = await anvilFor(t);
  const provider = await countingProxy(t, (await anvilFor(t)).url);
  const g = await gatewayFor(
    t,
    chain([
      { url: own.url, name: 'own' },
      { url: provider.url, name: 'provider', tier: 1 },
    ]),
  );
  const url = `${g.base}/v1/rpc/public`;
  for (let i = 0; i < 30; i++) {
    const r = await rpc(url, 'eth_getBalance', [addressFor(i), 'latest'], i);
    t.same(r.json, { jsonrpc: '2.0', id: i, result: '0x0' }, `call ${i} answered`);
  }
  t.equal(provider.count('eth_getBalance'), 0, 'the provider got none of them');

  own.process.kill('SIGKILL');
  await waitFor(async () => !(await inRotation(g, 'own')), { what: 'own node out of rotation', ms: 10_000 });
  for (let i = 30; i < 60; i++) {
    const r = await rpc(url, 'eth_getBalance', [addressFor(i), 'latest'], i);
    t.same(r.json, { jsonrpc: '2.0', id: i, result: '0x0' }, `call ${i} answered`);
  }
  t.equal(provider.count('eth_getBalance'), 30, 'the provider got every one of them');
});

t.test('a retry after a tier-0 failure goes up a tier', async (t) => {
  const own = await countingProxy(t, (await anvilFor(t)).url);
  const provider = await countingProxy(t, (await anvilFor(t)).url);
  const g = await gatewayFor(
    t,
    chain([
      { url: own.url, name: 'own' },
      { url: provider.url, name: 'provider', tier: 1 },
    ]),
  );
  own.fail((c) => c.method === 'eth_getBalance' && c.params[0] === addressFor(1));
  const r = await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', [addressFor(1), 'latest'], 1);
  t.same(r.json, { jsonrpc: '2.0', id: 1, result: '0x0' });
  t.equal(own.count('eth_getBalance'), 1, 'tried on the own node first');
  t.equal(provider.count('eth_getBalance'), 1, 'then on the provider');
});

/**
 * 200 calls a second for `seconds`, each with an address of its own; resolves with each call's status and the
 * time it was sent, by address.
 */
async function load(url: string, seconds: number): Promise<{ statuses: number[]; bodies: unknown[]; sentAt: Map<string, number> }> {
  const sentAt = new Map<string, number>();
  const answers: Array<Promise<{ status: number; json: unknown }>> = [];
  const start = performance.now();
  const total = 200 * seconds;
  for (let i = 0; i < total; i++) {
    const due = start + i * 5;
    const now = performance.now();
    if (due > now) await sleep(due - now);
    const address = addressFor(1000 + i);
    sentAt.set(address, performance.now());
    answers.push(rpc(url, 'eth_getBalance', [address, 'latest'], i));
  }
  const done = await Promise.all(answers);
  return { statuses: done.map((a) => a.status), bodies: done.map((a) => a.json), sentAt };
}

/** The most calls the gateway surely sent the node within one second (window-count.ts): sent by the client
 *  and arrived at the relay within it. */
function mostInASecond(calls: readonly SeenCall[], sentAt: ReadonlyMap<string, number>): number {
  const spans: Span[] = [];
  for (const c of balanceCalls(calls)) spans.push({ sent: sentAt.get(c.params[0] as string)!, answered: c.at! });
  if (spans.length === 0) return 0;
  const from = Math.min(...spans.map((s) => s.sent));
  const to = Math.max(...spans.map((s) => s.answered)) + 1000;
  let most = 0;
  for (const s of everyStep(from, to, 5)) most = Math.max(most, surelyWithin(spans, s));
  return most;
}

t.test('a provider quota of 50 rps under 200 rps of load: never exceeded, the rest spill', async (t) => {
  const provider = await countingProxy(t, (await anvilFor(t)).url);
  const other = await countingProxy(t, (await anvilFor(t)).url);
  const g = await gatewayFor(
    t,
    chain([
      { url: provider.url, name: 'provider', rps: 50 },
      { url: other.url, name: 'other', tier: 1 },
    ]),
  );
  const { statuses, sentAt } = await load(`${g.base}/v1/rpc/public`, 3);
  t.ok(
    statuses.every((s) => s === 200),
    `every call answered (the rest spilled): ${statuses.filter((s) => s !== 200).length} not`,
  );
  const most = mostInASecond(provider.calls, sentAt);
  t.ok(most <= 50, `the provider saw at most 50 calls in any second: ${most}`);
  t.ok(most >= 40, `and its quota was used: ${most} in its busiest second`);
  const got = provider.count('eth_getBalance');
  t.ok(got >= 100 && got <= 200, `the provider took its share over 3 s: ${got}`);
  // Distinct calls: a request moved off a stalled socket reaches its node twice (counted above, against the quota,
  // where there is one), which a loaded machine makes common on the unlimited node.
  const reached = new Set([...balanceCalls(provider.calls), ...balanceCalls(other.calls)].map((c) => c.params[0]));
  t.equal(reached.size, 600, 'the other node took the rest');
});

t.test('a provider quota alone: calls over it get 503 upstream_budget', async (t) => {
  const provider = await countingProxy(t, (await anvilFor(t)).url);
  const g = await gatewayFor(t, chain([{ url: provider.url, name: 'provider', rps: 50 }]));
  const { statuses, bodies, sentAt } = await load(`${g.base}/v1/rpc/public`, 3);
  const most = mostInASecond(provider.calls, sentAt);
  t.ok(most <= 50, `the provider saw at most 50 calls in any second: ${most}`);
  const refused = statuses.filter((s) => s === 503).length;
  t.equal(refused + provider.count('eth_getBalance'), 600, 'every call either reached the node or was refused');
  t.ok(refused >= 350, `most were refused: ${refused}`);
  t.equal(statuses.filter((s) => s !== 200 && s !== 503).length, 0, 'nothing else');
  const refusal = bodies[statuses.indexOf(503)] as { error: { code: number; message: string } };
  t.equal(refusal.error.code, -32099);
  t.match(refusal.error.message, /every node is at its rate budget/i, 'the message names the reason');
});

t.test('429 with Retry-After: 1: no call reaches the node for that second', async (t) => {
  const node = await countingProxy(t, (await anvilFor(t)).url);
  const other = await countingProxy(t, (await anvilFor(t)).url);
  const g = await gatewayFor(
    t,
    chain([
      { url: node.url, name: 'node' },
      { url: other.url, name: 'other', tier: 1 },
    ]),
  );
  const url = `${g.base}/v1/rpc/public`;
  let throttled = false;
  node.throttle((c) => {
    if (c.method !== 'eth_getBalance' || throttled) return undefined;
    throttled = true;
    return '1';
  });
  const first = await rpc(url, 'eth_getBalance', [addressFor(0), 'latest'], 0);
  t.same(first.json, { jsonrpc: '2.0', id: 0, result: '0x0' }, 'the throttled call was retried on the other node');
  t.equal(other.count('eth_getBalance'), 1);
  // Calls every 20 ms until one reaches the node again.
  let i = 1;
  await waitFor(
    async () => {
      const r = await rpc(url, 'eth_getBalance', [addressFor(i), 'latest'], i);
      t.equal(r.status, 200, `call ${i} answered`);
      i++;
      return node.count('eth_getBalance') > 1;
    },
    { what: 'a call to reach the node after its cooldown', ms: 5_000 },
  );
  const [throttledCall, next] = balanceCalls(node.calls);
  t.ok(next!.at! - throttledCall!.at! >= 1000, `the next call came ${Math.round(next!.at! - throttledCall!.at!)} ms after the 429`);
  t.ok(i > 10, `calls went to the other node meanwhile: ${i - 1}`);
  t.equal(g.logLines.filter((l) => l.includes('upstream answered 429')).length, 1, 'logged once');
  const metrics = await send('GET', `http://127.0.0.1:${g.gateway.metricsPort}/metrics`);
  t.match(metrics.text, /chaingate_upstream_cooldowns_total\{chain="devnet",upstream="node"\} 1/);
});

t.test('the balance the dev chain starts with is what anvil gives', async (t) => {
  // Not about budgets: makes sure the relays forward real answers (a relay answering 0x0 to all would pass).
  const provider = await countingProxy(t, (await anvilFor(t)).url);
  const g = await gatewayFor(t, chain([{ url: provider.url, name: 'provider', rps: 50 }]));
  const r = await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', 'latest'], 1);
  t.same(r.json, { jsonrpc: '2.0', id: 1, result: DEV_BALANCE });
});
