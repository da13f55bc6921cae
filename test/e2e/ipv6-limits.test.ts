/**
 * Per-IP limits hold for an IPv6 client's whole prefix (server.ipv6_prefix, default /64), whatever address
 * of it each call comes from: the public rate, the unknown-key throttle, the management per-IP rate, and
 * the WebSocket and event-stream caps, on one thread and across two workers. An IPv4-mapped address counts
 * as its IPv4 address; an IPv6 peer (::1) is limited by its prefix too.
 *
 * Loopback gives one IPv6 address (::1), so distinct addresses come as the last hop of X-Forwarded-For
 * (server.trust_proxy), which is keyed exactly as a socket's peer is (test/server/peer-address.test.ts).
 */
import t, { type Test } from 'tap';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { devnetBeacon } from '../support/devnet-beacon.js';
import { openEventStream } from '../support/event-stream.js';
import { scrape } from '../support/exposition.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { clearOfMinuteEnd } from '../support/wait-for.js';
import { openSocket, refusedUpgrade, wsUrl } from '../support/ws.js';

/** The `n`th address of the /64 `net` (`2001:db8:1:2`), n from 1. */
const inNet = (net: string, n: number): string => `${net}::${n.toString(16)}`;
const from = (ip: string): Record<string, string> => ({ 'x-forwarded-for': ip });

/** `count` calls to `url` at once, the ith with `headersOf(i)`: their statuses, and how long they took in all (ms). */
async function calls(
  url: string,
  count: number,
  headersOf: (i: number) => Record<string, string>,
): Promise<{ statuses: number[]; ms: number }> {
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: count }, (_, i) => rpc(url, 'eth_chainId', [], i, headersOf(i))));
  return { statuses: answers.map((a) => a.status), ms: performance.now() - started };
}

/** Admitted calls within one second are the limit exactly; calls spread wider may each second get it. */
function assertLimited(t: Test, run: { statuses: number[]; ms: number }, limit: number, what: string): void {
  const admitted = run.statuses.filter((s) => s === 200).length;
  t.same(
    run.statuses.filter((s) => s !== 200 && s !== 429),
    [],
    'every call answered or refused 429',
  );
  if (run.ms < 1000) t.equal(admitted, limit, `${what}: ${limit} of ${run.statuses.length} answered`);
  else t.ok(admitted <= limit * Math.ceil(run.ms / 1000), `${what}: ${admitted} answered over ${Math.round(run.ms)} ms`);
}

async function gatewayWithLimits(t: Test, workers: number) {
  const { g } = await devnetBeacon(t, {
    server: { default_chain: 'devnet', trust_proxy: true, workers },
    public: { rps_per_ip: 10, max_batch: 10 },
    management: { rps_per_ip: 6 },
    websocket: { max_connections_per_ip: 2 },
    sse: { max_connections_per_ip: 2 },
  });
  if (workers > 1) t.equal(g.gateway.workers?.count, workers, `${workers} workers`);
  return g;
}

for (const workers of [1, 2]) {
  t.test(`workers: ${workers}: every per-IP limit holds for a whole /64`, async (t) => {
    const g = await gatewayWithLimits(t, workers);

    t.test('public.rps_per_ip: forty addresses of one /64 get ten answers; another /64 its own', async (t) => {
      const url = `${g.base}/devnet/v1/rpc/public`;
      assertLimited(t, await calls(url, 40, (i) => from(inNet('2001:db8:1:2', i + 1))), 10, '2001:db8:1:2::1 … ::28');
      const other = await rpc(url, 'eth_chainId', [], 1, from('2001:db8:1:3::1'));
      t.equal(other.status, 200, 'the neighbouring /64 is another client');
      const mapped = await calls(url, 20, (i) => from(i % 2 === 0 ? '203.0.113.9' : '::ffff:203.0.113.9'));
      assertLimited(t, mapped, 10, '203.0.113.9 and ::ffff:203.0.113.9 are one client');
      t.equal((await rpc(url, 'eth_chainId', [], 1, from('203.0.113.10'))).status, 200, 'IPv4 stays per address');
    });

    t.test('the unknown-key throttle counts a /64 together', async (t) => {
      await clearOfMinuteEnd();
      const statuses: number[] = [];
      for (let i = 1; i <= 22; i++) {
        const r = await rpc(`${g.base}/devnet/v1/rpc/${'k'.repeat(30)}${i}`, 'eth_chainId', [], i, from(inNet('2001:db8:2:2', i)));
        statuses.push(r.status);
      }
      t.same(statuses, [...Array(20).fill(401), 429, 429], 'twenty unknown keys a minute from the /64, then 429');
      const other = await rpc(`${g.base}/devnet/v1/rpc/${'k'.repeat(31)}`, 'eth_chainId', [], 1, from('2001:db8:2:3::1'));
      t.equal(other.status, 401, 'another /64 still gets 401');
    });

    t.test('management.rps_per_ip counts a /64 together', async (t) => {
      const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('ipv6', 'free', 1000);
      const auth = { authorization: `Bearer ${owner.managementKey}` };
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          send('GET', `${g.base}/api/dashboard/account`, undefined, { ...auth, ...from(inNet('2001:db8:3:2', i + 1)) }),
        ),
      );
      const statuses = answers.map((a) => a.status).sort();
      t.same(statuses, [200, 200, 200, 200, 200, 200, 429, 429], 'six a second from the /64');
      t.match(answers.find((a) => a.status === 429)?.json, { error: { message: /6 per second per IP: management\.rps_per_ip/ } });
    });

    t.test('websocket.max_connections_per_ip counts a /64 together', async (t) => {
      const url = wsUrl(g.base, '/devnet/v1/rpc/public');
      await openSocket(t, url, { headers: from(inNet('2001:db8:4:2', 1)) });
      await openSocket(t, url, { headers: from(inNet('2001:db8:4:2', 2)) });
      const third = await refusedUpgrade(url, { headers: from(inNet('2001:db8:4:2', 3)) });
      t.equal(third.status, 429, 'a third socket from the /64 is refused');
      t.match(JSON.parse(third.body), { error: { message: /limit is 2 \(websocket\.max_connections_per_ip\)/ } });
      await openSocket(t, url, { headers: from('2001:db8:4:3::1') });
      t.pass('another /64 opens its own');
    });

    t.test('sse.max_connections_per_ip counts a /64 together', async (t) => {
      const url = `${g.base}/devnet-beacon/v1/rpc/public/eth/v1/events?topics=head`;
      const open = [await openEventStream(url, from(inNet('2001:db8:5:2', 1))), await openEventStream(url, from(inNet('2001:db8:5:2', 2)))];
      t.teardown(() => {
        for (const s of open) s.close();
      });
      t.same(
        open.map((s) => s.status),
        [200, 200],
      );
      const third = await openEventStream(url, from(inNet('2001:db8:5:2', 3)));
      open.push(third);
      t.equal(third.status, 429, 'a third stream from the /64 is refused');
      const other = await openEventStream(url, from('2001:db8:5:3::1'));
      open.push(other);
      t.equal(other.status, 200, 'another /64 opens its own');
    });
  });
}

t.test('an IPv6 peer (::1, no proxy) is limited by its /64', async (t) => {
  const node = await anvilFor(t);
  const g = await gatewayFor(t, {
    server: { host: '::1' },
    chains: { devnet: evmChain([node.url]) },
    public: { rps_per_ip: 10, max_batch: 10 },
  });
  assertLimited(t, await calls(`http://[::1]:${g.gateway.port}/v1/rpc/public`, 15, () => ({})), 10, 'fifteen calls from ::1');
});

for (const workers of [1, 2]) {
  t.test(`workers: ${workers}: a flood through the full tables shows in chaingate_limit_table_evictions_total`, async (t) => {
    const g = await gatewayFor(t, { server: { workers }, chains: { devnet: evmChain(['http://127.0.0.1:1']) } });
    const { limiter, unknownKeys } = g.gateway.context.tenancy;
    // The gateway's own tables (100,000 keys, the default), straight through its tenancy: HTTP would take minutes.
    // The rate table first, alone and as fast as it goes: far more keys within one second than it holds.
    const ips = Array.from({ length: 250_000 }, (_, i) => `2001:db8:${(i >>> 16).toString(16)}:${(i & 0xffff).toString(16)}::/64`);
    const keys = ips.map((ip) => `ip:${ip}`);
    let started = performance.now();
    for (const key of keys) limiter.take(key, 10);
    t.comment(`${keys.length} takes in ${Math.round(performance.now() - started)} ms`);
    started = performance.now();
    for (const ip of ips) unknownKeys.refuse(ip);
    t.comment(`${ips.length} unknown keys in ${Math.round(performance.now() - started)} ms`);
    const x = await scrape(g.gateway.metricsPort!);
    t.ok(x.value('chaingate_limit_table_evictions_total', { table: 'rate' }) > 0, 'rate evictions counted');
    t.ok(x.value('chaingate_limit_table_evictions_total', { table: 'unknown_keys' }) > 0, 'unknown-key evictions counted');
    t.equal(x.value('chaingate_limit_table_evictions_total', { table: 'websocket' }), 0, 'the others at 0');
    t.equal(x.value('chaingate_limit_table_evictions_total', { table: 'sse' }), 0);
  });
}
