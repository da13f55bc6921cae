/**
 * A per-method failover policy end to end (config chains.<slug>.failover, docs/failover.md), on a real anvil
 * behind two relays: one a fault relay (test/support/fault-relay.ts, seeded) that holds back a few eth_call
 * answers beyond its p90 and every eth_getLogs answer, and fails 30% of eth_getBalance calls; the other plain.
 * eth_call is hedged at its own p90 and never waits out a held answer; eth_getLogs has a longer timeout and no
 * hedge, so its slow answers are waited for and never sent twice; eth_getBalance is retried twice and always
 * answered.
 */
import t from 'tap';
import { performance } from 'node:perf_hooks';
import { countingProxy } from '../support/counting-proxy.js';
import { faultRelay } from '../support/fault-relay.js';
import { anvilFor, gatewayFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';

const SLOW_MS = 2500;
const LOGS_MS = 400;
/** Calls before eth_call's p90 is known (MIN_LATENCY_SAMPLES and a second for the window to be read again). */
const WARM_UP = 40;
const addressFor = (i: number): string => `0x${(0x2000 + i).toString(16).padStart(40, '0')}`;

t.test('eth_call hedged at its p90, eth_getLogs waited for, eth_getBalance retried past failures', async (t) => {
  const anvil = await anvilFor(t);
  const faulty = await faultRelay(t, anvil.url, {
    seed: 33,
    slow: [
      { methods: ['eth_call'], share: 0.08, ms: SLOW_MS },
      { methods: ['eth_getLogs'], share: 1, ms: LOGS_MS },
    ],
    fail: { methods: ['eth_getBalance'], share: 0.3 },
  });
  const plain = await countingProxy(t, anvil.url);
  // eth_getLogs takes LOGS_MS on either node: a heavy query, which a hedge would only send twice.
  plain.delay((call) => (call.method === 'eth_getLogs' ? LOGS_MS : undefined));
  // One thread: each worker thread keeps its own latency window, and a test of one window wants one.
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    public: { rps_per_ip: 10_000_000, max_batch: 1000, methods: { deny: [] } },
    chains: {
      devnet: {
        chain_id: 31337,
        timeout_s: 3,
        upstreams: [
          { name: 'faulty', url: faulty.url },
          { name: 'plain', url: plain.url },
        ],
        failover: {
          retries: 2,
          hedge: { after: '100ms' },
          breaker: { failure_streak: 20, failure_rate: 0.9 },
          methods: {
            eth_call: { hedge: { after: 'p90' } },
            // Without this the chain's hedge at 100 ms would send each one twice.
            eth_getLogs: { timeout_s: 5, hedge: { after: 'off' } },
          },
        },
      },
    },
  });
  const url = `${g.base}/v1/rpc/public`;

  // eth_call: 160 calls, one at a time so the p90 is learnt from the first ones.
  let slowest = 0;
  for (let i = 0; i < 160; i++) {
    const started = performance.now();
    const r = await rpc(url, 'eth_call', [{ to: addressFor(i), data: '0x' }, 'latest'], i);
    if (i >= WARM_UP) slowest = Math.max(slowest, performance.now() - started);
    t.equal(r.status, 200);
    // The window is read at most once a second: give it one after the warm-up.
    if (i === WARM_UP - 1) await new Promise((r) => setTimeout(r, 1100));
  }
  const toOf = (c: { params: unknown[] }): number => parseInt((c.params[0] as { to: string }).to, 16) - 0x2000;
  const held = faulty.slowed.filter((c) => c.method === 'eth_call' && toOf(c) >= WARM_UP).length;
  t.ok(held > 0, `the relay held back ${held} eth_call answers after the warm-up`);
  const sent = faulty.count('eth_call') + plain.count('eth_call');
  t.ok(sent > 160, `hedges went out: ${sent - 160}`);
  t.ok(slowest < 1000, `after the warm-up no client waited out a held answer, nor half the timeout (slowest ${slowest.toFixed(0)} ms)`);

  // eth_getLogs: slow on the faulty node, never hedged.
  for (let i = 0; i < 10; i++) {
    const started = performance.now();
    const r = await rpc(url, 'eth_getLogs', [{ fromBlock: '0x0', toBlock: 'latest', address: addressFor(500 + i) }], i);
    t.same((r.json as { result: unknown }).result, [], 'answered');
    t.ok(performance.now() - started >= LOGS_MS, 'after the slow answer, waited for');
  }
  t.equal(faulty.count('eth_getLogs') + plain.count('eth_getLogs'), 10, 'each eth_getLogs sent once: no hedge');
});

t.test('eth_getBalance with two retries past a node failing 30% of its calls: every call answered', async (t) => {
  const anvil = await anvilFor(t);
  const faulty = await faultRelay(t, anvil.url, { seed: 30, fail: { methods: ['eth_getBalance'], share: 0.3 } });
  const plain = await countingProxy(t, anvil.url);
  const g = await gatewayFor(t, {
    chains: {
      devnet: {
        chain_id: 31337,
        upstreams: [
          { name: 'faulty', url: faulty.url },
          { name: 'plain', url: plain.url },
        ],
        // The breaker keeps the failing node in rotation, so its failures keep coming and keep being retried.
        failover: { retries: 2, backoff_ms: 20, jitter_ms: 10, breaker: { failure_streak: 50, failure_rate: 0.9 } },
      },
    },
  });
  const url = `${g.base}/v1/rpc/public`;
  for (let i = 0; i < 60; i++) {
    const r = await rpc(url, 'eth_getBalance', [addressFor(1000 + i), 'latest'], i);
    t.equal((r.json as { result?: string }).result, '0x0');
  }
  t.ok(faulty.failed.length > 0, `the relay failed ${faulty.failed.length} eth_getBalance calls, all retried`);
});
