/**
 * Admission and settlement of one call against the real tenancy: requests per second and RU per
 * second on a test clock, RU reserved and settled in a real SQLite ledger, usage rows as written,
 * the fail-closed answer while the store cannot write, the size surcharge and the cache-hit price.
 */
import t from 'tap';
import Database from 'better-sqlite3';
import { admitCost, admitRu, chargeAsCacheHit, costWithSize, countRefusal, settleCall, takeRequest } from '../../src/pipeline/admission.js';
import { ERRORS } from '../../src/errors.js';
import { invariantGaps } from '../store/temp-store.js';
import { keyedCaller, pipelineContext, publicCaller, storedBalance, usageRows } from '../support/pipeline-context.js';

const MIB = 1_048_576;

const CONFIG = {
  chains: { devnet: { chain_id: 31337, upstreams: [{ url: 'http://127.0.0.1:1' }] } },
  plans: {
    free: { rps: 3, max_endpoints: 10 },
    metered: { rps: 1000, ru_per_second: 100, max_endpoints: 10 },
  },
  ru: { default: 15, methods: { eth_call: 150 } },
};

t.test('takeRequest: rps per limit key, refused with the wait, admitted again a second later', async (t) => {
  const s = pipelineContext(t, CONFIG);
  const a = keyedCaller(s, 'devnet').caller;
  const b = keyedCaller(s, 'devnet').caller;
  const outcomes = [1, 2, 3, 4].map(() => takeRequest(s.ctx.tenancy, a));
  t.same(outcomes.slice(0, 3), [{ ok: true }, { ok: true }, { ok: true }], 'free plan: 3 per second');
  t.match(outcomes[3], { ok: false, retryAfterMs: Number });
  const wait = (outcomes[3] as { retryAfterMs: number }).retryAfterMs;
  t.ok(wait > 0 && wait <= 1000, `retry after ${wait} ms`);
  t.same(takeRequest(s.ctx.tenancy, b), { ok: true }, 'another endpoint has its own window');
  s.clock.now += wait;
  t.same(takeRequest(s.ctx.tenancy, a), { ok: true }, 'admitted once the wait has passed');
  const ip = publicCaller(s);
  t.same(takeRequest(s.ctx.tenancy, { ...ip, rps: 1 }), { ok: true });
  t.match(takeRequest(s.ctx.tenancy, { ...ip, rps: 1 }), { ok: false }, 'the public path is limited by its IP key');
  t.same(usageRows(s), [], 'taking a request meters nothing');
});

t.test("admitCost: the method's RU reserved in the ledger; a public call is not metered", async (t) => {
  const s = pipelineContext(t, CONFIG);
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 100 });
  const ledger = s.ctx.tenancy.ledger;
  const cases: Array<[string, number]> = [
    ['eth_chainId', 5],
    ['eth_getBalance', 15],
    ['eth_getLogs', 50],
  ];
  const reservations = [];
  for (const [method, ru] of cases) {
    const r = admitCost(s.ctx.tenancy, caller, method);
    t.match(r, { ok: true, ru, reservation: { ownerId, ru } }, method);
    if (r.ok) reservations.push(r);
  }
  t.equal(ledger.available(ownerId), 100 - 5 - 15 - 50, 'each reservation holds its RU');
  t.same(admitCost(s.ctx.tenancy, caller, 'eth_call'), { ok: false, error: 'insufficient_balance' }, '150 RU against 30 left');
  t.equal(ledger.available(ownerId), 30, 'a refusal reserves nothing');
  t.same(admitCost(s.ctx.tenancy, publicCaller(s), 'eth_call'), { ok: true, reservation: null, ru: 150 }, 'public: priced, not reserved');
  for (const r of reservations) ledger.refund(r.reservation!);
  t.equal(storedBalance(s, ownerId), 100, 'reservations alone never reach the store');
});

t.test('admitRu: the RU/s limit of the plan, per endpoint, on the test clock', async (t) => {
  const s = pipelineContext(t, CONFIG);
  const { caller, ownerId } = keyedCaller(s, 'devnet', { plan: 'metered', ru: 10_000 });
  const other = keyedCaller(s, 'devnet', { plan: 'metered', ru: 10_000 }).caller;
  const ledger = s.ctx.tenancy.ledger;
  t.match(admitRu(s.ctx.tenancy, caller, 60), { ok: true });
  t.match(admitRu(s.ctx.tenancy, caller, 40), { ok: true }, '100 RU within the second: at the limit');
  const refused = admitRu(s.ctx.tenancy, caller, 1);
  t.match(refused, { ok: false, error: 'rate_limited', retryAfterMs: Number });
  t.ok(!refused.ok && refused.retryAfterMs! > 0 && refused.retryAfterMs! <= 1000);
  t.equal(ledger.available(ownerId), 10_000 - 100, 'the refused call reserved nothing');
  t.match(admitRu(s.ctx.tenancy, other, 100), { ok: true }, 'another endpoint has its own RU/s');
  s.clock.now += 1000;
  t.match(admitRu(s.ctx.tenancy, caller, 100), { ok: true }, 'a second later the window is free');
  const tooBig = admitRu(s.ctx.tenancy, caller, 101);
  t.same(tooBig, { ok: false, error: 'rate_limited', retryAfterMs: Infinity }, 'more RU than the plan allows per second never fits');
  const free = keyedCaller(s, 'devnet', { plan: 'free', ru: 10_000 }).caller;
  for (let i = 0; i < 5; i++) t.match(admitRu(s.ctx.tenancy, free, 1000), { ok: true }, 'a plan without ru_per_second has no RU/s limit');
});

t.test('fail-closed: while the ledger cannot write, metered calls get store_unavailable', async (t) => {
  const s = pipelineContext(t, CONFIG);
  const { tenancy } = s.ctx;
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 1000 });
  const first = admitCost(tenancy, caller, 'eth_getBalance');
  if (!first.ok) throw new Error('not admitted');
  settleCall(tenancy, caller, 'eth_getBalance', first, { ok: true, bytes: 10 });
  // Another connection (the CLI, a backup) holds the write lock: the flush fails within the busy timeout.
  const other = new Database(tenancy.store!.db.name);
  t.teardown(() => other.close());
  other.exec('BEGIN IMMEDIATE');
  t.equal(tenancy.ledger.flush(), false);
  t.same(admitCost(tenancy, caller, 'eth_getBalance'), { ok: false, error: 'store_unavailable' });
  t.same(admitCost(tenancy, publicCaller(s), 'eth_getBalance'), { ok: true, reservation: null, ru: 15 }, 'the public path needs no store');
  other.exec('ROLLBACK');
  t.equal(tenancy.ledger.flush(), true);
  t.match(admitCost(tenancy, caller, 'eth_getBalance'), { ok: true }, 'admitted again once a flush passes');
  t.equal(tenancy.ledger.available(ownerId), 1000 - 15 - 15);
  t.equal(storedBalance(s, ownerId), 1000 - 15, 'the debit kept in memory reached the store');
});

t.test('costWithSize: 100% more per started MiB past the first', async (t) => {
  const cases: Array<[number, number, number]> = [
    [10, 0, 10],
    [10, MIB, 10],
    [10, MIB + 1, 20],
    [10, 2 * MIB, 20],
    [10, 2 * MIB + 1, 30],
    [7, 10 * MIB, 70],
    [0, 5 * MIB, 0],
  ];
  for (const [ru, bytes, cost] of cases) t.equal(costWithSize(ru, bytes), cost, `${ru} RU, ${bytes} bytes`);
});

t.test('settleCall: charged with the surcharge, refunded on failure, each counted once in usage', async (t) => {
  const s = pipelineContext(t, CONFIG);
  const { tenancy } = s.ctx;
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 1000 });
  const endpointId = caller.auth!.endpointId;
  const cases: Array<{
    method: string;
    outcome: { ok: true; bytes: number } | { ok: false; status: number; code: 'upstream_error' };
    charged: number;
  }> = [
    { method: 'eth_getBalance', outcome: { ok: true, bytes: 100 }, charged: 15 },
    { method: 'eth_getLogs', outcome: { ok: true, bytes: MIB + 1 }, charged: 100 },
    { method: 'eth_chainId', outcome: { ok: false, status: 502, code: 'upstream_error' }, charged: 0 },
  ];
  let spent = 0;
  for (const c of cases) {
    const admission = admitCost(tenancy, caller, c.method);
    if (!admission.ok) throw new Error(`${c.method} not admitted`);
    settleCall(tenancy, caller, c.method, admission, c.outcome);
    spent += c.charged;
    t.equal(tenancy.ledger.available(ownerId), 1000 - spent, `${c.method}: ${c.charged} RU`);
  }
  settleCall(tenancy, publicCaller(s), 'eth_getBalance', { reservation: null, ru: 15 }, { ok: true, bytes: 10 });
  t.same(
    usageRows(s),
    [
      { owner_id: ownerId, endpoint_id: endpointId, method: 'eth_chainId', status: 502, requests: 1, ru: 0 },
      { owner_id: ownerId, endpoint_id: endpointId, method: 'eth_getBalance', status: 0, requests: 1, ru: 15 },
      { owner_id: ownerId, endpoint_id: endpointId, method: 'eth_getLogs', status: 0, requests: 1, ru: 100 },
    ],
    'the public call left no row',
  );
  t.equal(storedBalance(s, ownerId), 1000 - 115);
  t.same(
    invariantGaps(tenancy.store!.db).filter((g) => g.gap !== 0),
    [],
    'credits = usage + balance for every owner',
  );
});

t.test('settleCall: a failure is kept under the error row it was answered with, never one guessed from its status', async (t) => {
  const s = pipelineContext(t, CONFIG);
  const { tenancy } = s.ctx;
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 1000 });
  const endpointId = caller.auth!.endpointId;
  const failures = [
    { status: 503, code: 'shutting_down' as const },
    { status: 402, code: 'insufficient_balance' as const },
    { status: 401, code: 'unauthorized' as const },
    { status: 503, code: null },
  ];
  for (const outcome of failures) {
    const admission = admitCost(tenancy, caller, 'eth_chainId');
    if (!admission.ok) throw new Error('not admitted');
    settleCall(tenancy, caller, 'eth_chainId', admission, { ok: false, ...outcome });
  }
  if (!tenancy.ledger.flush()) throw new Error('the ledger flush failed');
  const kept = await tenancy.accounts.failures(ownerId, endpointId, 10);
  t.same(
    kept.map((f) => [f.http_status, f.error, f.message]).reverse(),
    [
      [503, 'shutting_down', ERRORS.shutting_down.message],
      [402, 'insufficient_balance', ERRORS.insufficient_balance.message],
      [401, 'unauthorized', ERRORS.unauthorized.message],
      [503, null, 'Failed with HTTP 503'],
    ],
    "a 503 while shutting down is not upstream_budget; a node's own 503 is its status, no row",
  );
});

t.test('countRefusal: a keyed refusal is a usage row at 0 RU; a public one is not counted', async (t) => {
  const s = pipelineContext(t, CONFIG);
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 50 });
  countRefusal(s.ctx.tenancy, caller, 'eth_call', 429, 'rate_limited');
  countRefusal(s.ctx.tenancy, caller, 'eth_call', 429, 'rate_limited');
  countRefusal(s.ctx.tenancy, caller, '(invalid)', -32600, 'invalid_request');
  countRefusal(s.ctx.tenancy, publicCaller(s), 'eth_call', 429, 'rate_limited');
  const endpointId = caller.auth!.endpointId;
  t.same(usageRows(s), [
    { owner_id: ownerId, endpoint_id: endpointId, method: '(invalid)', status: -32600, requests: 1, ru: 0 },
    { owner_id: ownerId, endpoint_id: endpointId, method: 'eth_call', status: 429, requests: 2, ru: 0 },
  ]);
  t.equal(storedBalance(s, ownerId), 50, 'nothing debited');
});

t.test("chargeAsCacheHit: the factor's share, rounded up to a whole RU after 6 decimals", async (t) => {
  const cases: Array<[number, number, number]> = [
    [50, 0.28, 14], // 14.000000000000002 in floating point
    [15, 0.5, 8],
    [10, 0.5, 5],
    [1, 0.01, 1],
    [3, 1, 3],
    [7, 0, 0],
    [0, 0.5, 0],
    [100, 0.333, 34],
    [29, 0.1, 3],
  ];
  for (const [ru, factor, price] of cases) {
    const admission = { ru };
    chargeAsCacheHit(admission, factor);
    t.equal(admission.ru, price, `${ru} RU × ${factor}`);
  }
});
