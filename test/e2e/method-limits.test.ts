/**
 * Limits per method (`plans.<name>.method_limits`, `public.method_limits`) on a gateway in front of a real
 * anvil, behind a proxy that counts what reaches it: a batch's items counted in order (the last of the budget
 * admitted, the rest refused with a message naming the method, the pattern, the limit and the key) and never
 * forwarded; Retry-After on a lone refusal; the keyless path per IP; steady traffic never over the limit and
 * never refused below 98 % of it; a reload's new limits; two worker threads holding the limit together, and a fleet of two instances on one Redis.
 */
import t, { type Test } from 'tap';
import type { Config } from '../../src/config/schema.js';
import { type CountingProxy, countingProxy } from '../support/counting-proxy.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, rpc, send } from '../support/rpc.js';
import { startPostgres, startRedis } from '../support/servers.js';
import { everyStep, mayBeWithin, type Span, surelyWithin } from '../support/window-count.js';

const LIMITED = 'eth_getTransactionCount';

/** A fresh address per call, so that no two calls are one shared flight: each admitted call reaches the node. */
let nextAddress = 1;
const address = (): string => `0x${(nextAddress++).toString(16).padStart(40, '0')}`;

async function keyOn(g: TestGateway, plan: string): Promise<string> {
  const accounts = g.gateway.context.tenancy.accounts;
  const owner = await accounts.createOwner(`o${Math.random().toString(36).slice(2, 8)}`, plan, 100_000_000);
  const made = await accounts.createEndpoint(owner.id, 'devnet', 'e', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  return made.apiKey;
}

/**
 * Which of `calls` (of the limited method) reached the node behind `proxy`, by their addresses: a node may see
 * a call twice (the upstream client sends again what a closing socket left unanswered), never one refused.
 */
function reached(proxy: CountingProxy, calls: ReadonlyArray<{ params: unknown[] }>): boolean[] {
  const seen = new Set(proxy.calls.filter((c) => c.method === LIMITED).map((c) => c.params[0]));
  return calls.map((c) => seen.has(c.params[0]));
}

interface Answer {
  id: number;
  result?: unknown;
  error?: { code: number; message: string };
}

/**
 * `clients` callers, each calling `url` again as soon as answered, for `ms`: the spans of the calls admitted
 * and of those refused 429, and any other status seen.
 */
async function hammer(
  url: string,
  ms: number,
  clients: number,
): Promise<{ admitted: Span[]; refused: Span[]; other: number[]; start: number }> {
  const admitted: Span[] = [];
  const refused: Span[] = [];
  const other: number[] = [];
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < end) {
        const sent = performance.now();
        const r = await rpc(url, LIMITED, [address(), 'latest']);
        const span = { sent, answered: performance.now() };
        if (r.status === 200 && (r.json as Answer).result !== undefined) admitted.push(span);
        else if (r.status === 429) refused.push(span);
        else other.push(r.status);
      }
    }),
  );
  return { admitted, refused, other, start };
}

/** Never over the limit in any second, never refused below 98 % of it (both bounds hold whatever the delays). */
function checkSteady(t: Test, run: Awaited<ReturnType<typeof hammer>>, limit: number, ms: number): void {
  const { admitted, refused, other, start } = run;
  const busiest = Math.max(...[...everyStep(start, start + ms), ...admitted.map((x) => x.sent)].map((s) => surelyWithin(admitted, s)));
  const emptiest = Math.min(...refused.map((x) => mayBeWithin(admitted, x.sent, x.answered)));
  t.comment(`${admitted.length} admitted, ${refused.length} refused in ${ms} ms; busiest second ${busiest}, before a refusal ${emptiest}`);
  t.same(other, [], 'every call admitted or refused 429');
  t.ok(refused.length >= limit, `overloaded: ${refused.length} refused`);
  t.ok(busiest <= limit, `no second holds more than ${limit}: the busiest holds ${busiest}`);
  t.ok(emptiest >= 0.98 * limit, `no refusal below 98 % of ${limit}: the emptiest second before one held ${emptiest}`);
}

t.test('one thread: batches in order, Retry-After, the keyless path, steady traffic, a reload', async (t) => {
  const node = await anvilFor(t);
  const proxy = await countingProxy(t, node.url);
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    chains: { devnet: evmChain([proxy.url]) },
    plans: {
      capped: { rps: 100_000, max_endpoints: 10, method_limits: { [LIMITED]: 50, 'debug_*': 1 } },
      steady: { rps: 100_000, max_endpoints: 10, method_limits: { [LIMITED]: 20 } },
    },
    public: { rps_per_ip: 10_000_000, max_batch: 1000, method_limits: { 'eth_getTransaction*': 3 } },
  });
  const key = await keyOn(g, 'capped');
  const url = `${g.base}/v1/rpc/${key}`;

  await t.test('a batch: the limited method admitted up to its last unit, in order; the rest never reach the node', async (t) => {
    // 60 calls of the limited method, an eth_chainId after every sixth: 50 per second for the method alone.
    const calls: Array<{ jsonrpc: string; id: number; method: string; params: unknown[] }> = [];
    for (let i = 0; i < 60; i++) {
      calls.push({ jsonrpc: '2.0', id: calls.length, method: LIMITED, params: [address(), 'latest'] });
      if (i % 6 === 5) calls.push({ jsonrpc: '2.0', id: calls.length, method: 'eth_chainId', params: [] });
    }
    const sentAt = performance.now();
    const r = await post(url, JSON.stringify(calls));
    t.equal(r.status, 200, 'a batch with answers is 200');
    const answers = r.json as Answer[];
    const limited = answers.filter((a) => calls[a.id]!.method === LIMITED);
    t.same(
      limited.map((a) => (a.result !== undefined ? 'ok' : a.error?.code)),
      [...Array(50).fill('ok'), ...Array(10).fill(-32005)],
      'the first 50 answered, the last 10 refused -32005',
    );
    t.equal(
      limited[59]!.error?.message,
      `Rate limit exceeded: ${LIMITED} is limited to 50 requests per second per key ('${LIMITED}' in plans.capped.method_limits)`,
    );
    t.ok(
      answers.filter((a) => calls[a.id]!.method === 'eth_chainId').every((a) => a.result === '0x7a69'),
      'the other method of the batch is not limited',
    );
    t.same(
      reached(
        proxy,
        calls.filter((c) => c.method === LIMITED),
      ),
      [...Array(50).fill(true), ...Array(10).fill(false)],
      'the node saw the 50 admitted, none refused',
    );

    const loneParams = [address(), 'latest'];
    const lone = await rpc(url, LIMITED, loneParams);
    // Still in the batch's second (unless the machine took most of it to answer the batch): refused.
    if (performance.now() - sentAt < 1000) {
      t.equal(lone.status, 429, 'a lone refusal is 429');
      t.equal(lone.headers['retry-after'], '1', 'with Retry-After, as the plan rps has');
      t.match(lone.json, { error: { code: -32005, message: /plans\.capped\.method_limits/ } });
      t.same(reached(proxy, [{ params: loneParams }]), [false], 'nor the lone refusal');
    }
  });

  await t.test('the keyless path: per client IP, naming public.method_limits', async (t) => {
    const pub = `${g.base}/v1/rpc/public`;
    const calls = [
      ...Array.from({ length: 4 }, (_, id) => ({ jsonrpc: '2.0', id, method: LIMITED, params: [address(), 'latest'] })),
      { jsonrpc: '2.0', id: 4, method: 'eth_getTransactionByHash', params: [`0x${'ab'.repeat(32)}`] },
    ];
    const answers = (await post(pub, JSON.stringify(calls))).json as Answer[];
    t.same(
      answers.map((a) => (a.error === undefined ? 'ok' : a.error.code)),
      ['ok', 'ok', 'ok', -32005, -32005],
      "3 a second for the IP, whichever method 'eth_getTransaction*' governs",
    );
    t.equal(
      answers[4]!.error?.message,
      "Rate limit exceeded: eth_getTransactionByHash is limited to 3 requests per second per client IP ('eth_getTransaction*' in public.method_limits)",
    );
    const keyed = (await rpc(url, 'eth_getTransactionByHash', [`0x${'ab'.repeat(32)}`])).json as Answer;
    t.equal(keyed.error, undefined, "a key's calls are not the keyless path's");
  });

  await t.test('steady traffic for 3 s: never over 20 a second, never refused below 98 % of it', async (t) => {
    const steady = `${g.base}/v1/rpc/${await keyOn(g, 'steady')}`;
    checkSteady(t, await hammer(steady, 3000, 6), 20, 3000);
  });

  await t.test("a reload applies a plan's new limits from the next request", async (t) => {
    const running = g.gateway.context.config;
    const next: Config = {
      ...running,
      plans: { ...running.plans, capped: { ...running.plans.capped!, method_limits: { [LIMITED]: 5 } } },
    };
    await g.gateway.reload(next);
    const owner = await g.gateway.context.tenancy.accounts.createOwner('viewer', 'capped', 0);
    const account = await send('GET', `${g.base}/api/dashboard/account`, undefined, { authorization: `Bearer ${owner.managementKey}` });
    t.match(account.json, { data: { plan: { method_limits: { [LIMITED]: 5 } } } }, "the owner's account shows the plan's limits");
    const fresh = `${g.base}/v1/rpc/${await keyOn(g, 'capped')}`;
    const batch = Array.from({ length: 8 }, (_, id) => ({ jsonrpc: '2.0', id, method: LIMITED, params: [address(), 'latest'] }));
    const answers = (await post(fresh, JSON.stringify(batch))).json as Answer[];
    t.same(
      answers.map((a) => (a.result !== undefined ? 'ok' : a.error?.message)),
      [
        ...Array(5).fill('ok'),
        ...Array(3).fill(
          `Rate limit exceeded: ${LIMITED} is limited to 5 requests per second per key ('${LIMITED}' in plans.capped.method_limits)`,
        ),
      ],
    );
  });
});

t.test('two worker threads hold a method limit for the process', async (t) => {
  const node = await anvilFor(t);
  const LIMIT = 30;
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: evmChain([node.url]) },
    plans: { capped: { rps: 100_000, max_endpoints: 10, method_limits: { [LIMITED]: LIMIT } } },
  });
  t.equal(g.gateway.workers?.count, 2);
  const url = `${g.base}/v1/rpc/${await keyOn(g, 'capped')}`;
  // A connection per call, so the kernel spreads them over both workers, in a fresh key's first second: at
  // most LIMIT admitted, and at least 98 % of it when the calls were all answered within that second. A machine
  // too loaded for that tries again with another key (at most three times).
  let statuses: number[] = [];
  let tookMs = Infinity;
  for (let trial = 0; trial < 3 && tookMs >= 1000; trial++) {
    const fresh = trial === 0 ? url : `${g.base}/v1/rpc/${await keyOn(g, 'capped')}`;
    const start = performance.now();
    statuses = await Promise.all(Array.from({ length: 3 * LIMIT }, () => rpc(fresh, LIMITED, [address(), 'latest']).then((r) => r.status)));
    tookMs = performance.now() - start;
  }
  const served = statuses.filter((s) => s === 200).length;
  t.comment(`${served} of ${statuses.length} served in ${Math.round(tookMs)} ms`);
  t.ok(served <= LIMIT, `${served} served: never over ${LIMIT} across both workers`);
  if (tookMs < 1000) t.ok(served >= 0.98 * LIMIT, `${served} served: never refused below 98 % of it`);
  t.ok(
    statuses.every((s) => s === 200 || s === 429),
    'the rest are 429',
  );
  // Then steady traffic on a key of its own, whose every call each worker may take.
  checkSteady(t, await hammer(`${g.base}/v1/rpc/${await keyOn(g, 'capped')}`, 2000, 8), LIMIT, 2000);
});

t.test('a fleet of two instances holds a method limit together (Redis)', async (t) => {
  const [node, pg, redis] = await Promise.all([anvilFor(t), startPostgres(t), startRedis(t)]);
  const proxy = await countingProxy(t, node.url);
  const LIMIT = 50;
  const one = (instance: string): Promise<TestGateway> =>
    gatewayFor(t, {
      storage: { url: pg.url },
      cluster: { redis_url: redis.url, instance, reservation_ttl_s: 3, reservation_block_ru: 5000 },
      ledger: { flush_interval_ms: 100 },
      plans: { capped: { rps: 100_000, max_endpoints: 10, method_limits: { [LIMITED]: LIMIT } } },
      chains: { devnet: evmChain([proxy.url]) },
    });
  const [a, b] = await Promise.all([one('gw-a'), one('gw-b')]);
  const batch = (n: number) =>
    Array.from({ length: n }, (_, id) => ({ jsonrpc: '2.0', id, method: LIMITED, params: [address(), 'latest'] }));
  const outcome = (x: Answer) => (x.result !== undefined ? 'ok' : x.error?.code);
  // 30 items through a, then 30 through b, on a key both have met (no store lookup on the way): b's last 10
  // are over the fleet's 50, in order. Both must fall in one second: a machine too loaded for that tries
  // again with another key (at most three times).
  let first: Answer[] = [];
  let second: Answer[] = [];
  let batchesMs = Infinity;
  for (let trial = 0; trial < 3 && batchesMs >= 1000; trial++) {
    const key = await keyOn(a, 'capped');
    for (const g of [a, b]) t.equal((await rpc(`${g.base}/v1/rpc/${key}`, 'eth_chainId')).status, 200, 'the key is known on both');
    const [toA, toB] = [batch(30), batch(30)];
    const start = performance.now();
    first = (await post(`${a.base}/v1/rpc/${key}`, JSON.stringify(toA))).json as Answer[];
    second = (await post(`${b.base}/v1/rpc/${key}`, JSON.stringify(toB))).json as Answer[];
    batchesMs = performance.now() - start;
    t.comment(`two batches in ${Math.round(batchesMs)} ms`);
    const seen = reached(proxy, [...toA, ...toB]);
    if (batchesMs < 1000) t.same(seen, [...Array(50).fill(true), ...Array(10).fill(false)], 'the node saw the 50 admitted, none refused');
  }
  t.same(first.map(outcome), Array(30).fill('ok'), 'a: 30 of 30');
  t.same(second.map(outcome), [...Array(20).fill('ok'), ...Array(10).fill(-32005)], 'b: the 20 left of the 50, then refused');
  t.match(
    second[29]!.error?.message,
    /is limited to 50 requests per second per key \('eth_getTransactionCount' in plans\.capped\.method_limits\)/,
  );

  // A fresh key's first second, single calls spread over both instances at once.
  const fresh = await keyOn(a, 'capped');
  const start = performance.now();
  const statuses = await Promise.all(
    Array.from({ length: 3 * LIMIT }, (_, i) => rpc(`${(i % 2 === 0 ? a : b).base}/v1/rpc/${fresh}`, LIMITED, [address(), 'latest'])),
  ).then((rs) => rs.map((r) => r.status));
  const tookMs = performance.now() - start;
  const served = statuses.filter((s) => s === 200).length;
  t.comment(`${served} of ${statuses.length} served in ${Math.round(tookMs)} ms`);
  t.ok(served <= LIMIT, `never over ${LIMIT} across the fleet (${served})`);
  if (tookMs < 1000) t.ok(served >= 0.98 * LIMIT, `never refused below 98 % of it (${served})`);
  t.ok(
    statuses.every((s) => s === 200 || s === 429),
    'the rest are 429',
  );
});
