/**
 * Limits per method on a test clock: which pattern governs a method (the most specific), the last request
 * of a budget and the window's edge, three patterns side by side, the keyless path per client IP, and the
 * grant a fleet's Redis gives a request, spent by its items in order.
 */
import t, { type Test } from 'tap';
import { parseBody, type ParsedItem } from '../../src/jsonrpc/parse.js';
import type { FleetLimiter, FleetTake } from '../../src/limits/fleet-limiter.js';
import { UNAVAILABLE } from '../../src/limits/fleet-limiter.js';
import type { Grant } from '../../src/pipeline/admission.js';
import { compileMethodLimits, methodLimitsOf, ruleFor, takeMethodsInFleet } from '../../src/pipeline/method-limits.js';
import { type ItemPlan, planItem } from '../../src/pipeline/plan.js';
import { keyedCaller, pipelineContext, type PipelineSetup, publicCaller, storedBalance } from '../support/pipeline-context.js';

function call(id: number, method: string, params: unknown[] = []): ParsedItem {
  const parsed = parseBody(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, method, params })));
  if (parsed.kind !== 'single') throw new Error('not a single request');
  return parsed.item;
}

/** The outcome of a planned item answered at once, with its error message and Retry-After when refused. */
function outcomeOf(plan: ItemPlan): { outcome: string; message?: string; retryAfterMs?: number } {
  if (plan.kind !== 'answer') throw new Error(`not answered at once: ${plan.kind}`);
  if (plan.outcome === 'ok') return { outcome: 'ok' };
  const body = JSON.parse(plan.answer) as { error: { code: number; message: string } };
  return { outcome: `${plan.outcome} ${body.error.code}`, message: body.error.message, retryAfterMs: plan.retryAfterMs! };
}

const LIMITS = { eth_chainId: 3, 'eth_*': 5, 'web3_*': 2 };

function setup(t: Test, publicLimits?: Record<string, number>): PipelineSetup {
  return pipelineContext(t, {
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: 'http://127.0.0.1:1' }] } },
    plans: { capped: { rps: 1000, max_endpoints: 5, method_limits: LIMITS }, open: { rps: 1000, max_endpoints: 5 } },
    ...(publicLimits === undefined ? {} : { public: { rps_per_ip: 1000, max_batch: 100, method_limits: publicLimits } }),
  });
}

t.test('the most specific pattern governs a method: its exact name, else the longest prefix', async (t) => {
  const limits = compileMethodLimits({ '*': 100, 'eth_*': 20, 'eth_get*': 7, eth_getLogs: 2 }, 'plans.p.method_limits', 'key');
  t.equal(ruleFor(limits, 'eth_getLogs')?.pattern, 'eth_getLogs');
  t.equal(ruleFor(limits, 'eth_getBalance')?.pattern, 'eth_get*');
  t.equal(ruleFor(limits, 'eth_call')?.pattern, 'eth_*');
  t.equal(ruleFor(limits, 'net_version')?.pattern, '*');
  t.equal(ruleFor(compileMethodLimits({ 'debug_*': 1 }, 'public.method_limits', 'client IP'), 'eth_call'), null, 'no pattern: no limit');
});

t.test('the last request of a budget, the window edge, three patterns each with its own window', async (t) => {
  const s = setup(t);
  const { caller, ownerId } = keyedCaller(s, 'devnet', { plan: 'capped', ru: 1000 });
  const plan = (it: ParsedItem) => outcomeOf(planItem(s.ctx, s.chain('devnet'), caller, it, 'http'));
  const balance = storedBalance(s, ownerId);

  for (let i = 0; i < 3; i++) t.same(plan(call(i, 'eth_chainId')), { outcome: 'ok' }, `eth_chainId ${i + 1} of 3`);
  const refused = plan(call(3, 'eth_chainId'));
  t.same(
    refused,
    {
      outcome: 'rate_limited -32005',
      message: "Rate limit exceeded: eth_chainId is limited to 3 requests per second per key ('eth_chainId' in plans.capped.method_limits)",
      retryAfterMs: 1000,
    },
    'the 4th in the same second: 429 naming the method, the pattern, the limit and the key',
  );
  // eth_* governs the other eth_ methods with a window of its own: eth_chainId's three did not count there.
  for (let i = 0; i < 5; i++)
    t.same(plan(call(10 + i, i % 2 === 0 ? 'eth_accounts' : 'eth_mining')), { outcome: 'ok' }, `eth_* ${i + 1} of 5`);
  t.match(plan(call(20, 'eth_accounts')), {
    outcome: 'rate_limited -32005',
    message: /eth_accounts is limited to 5 requests .*'eth_\*' in/,
  });
  t.same(plan(call(21, 'web3_sha3', ['0x'])), { outcome: 'ok' });
  t.same(plan(call(22, 'web3_sha3', ['0x'])), { outcome: 'ok' });
  t.match(plan(call(23, 'web3_sha3', ['0x'])), { outcome: 'rate_limited -32005', message: /'web3_\*'/ });

  s.clock.now += 999;
  t.match(plan(call(30, 'eth_chainId')), { outcome: 'rate_limited -32005', retryAfterMs: 1 }, 'at 999 ms the window still holds them');
  s.clock.now += 1;
  for (let i = 0; i < 3; i++) t.same(plan(call(31 + i, 'eth_chainId')), { outcome: 'ok' }, 'a full second later: the budget again');
  t.match(plan(call(34, 'eth_chainId')), { outcome: 'rate_limited -32005' });

  // Admitted: 3 + 5 + 2 + 3 calls (eth_chainId, eth_accounts, eth_mining 5 RU each; web3_sha3 15): refusals cost nothing.
  t.equal(balance - storedBalance(s, ownerId), 11 * 5 + 2 * 15, 'only the admitted calls were charged');
});

t.test('a plan without method_limits asks nothing; the keyless path limits per client IP', async (t) => {
  const s = setup(t, { eth_chainId: 2 });
  const open = keyedCaller(s, 'devnet', { plan: 'open' }).caller;
  t.equal(methodLimitsOf(s.ctx.config, open), null);
  for (let i = 0; i < 10; i++)
    t.same(outcomeOf(planItem(s.ctx, s.chain('devnet'), open, call(i, 'eth_chainId'), 'http')), { outcome: 'ok' });

  const [a, b] = [publicCaller(s, '192.0.2.1'), publicCaller(s, '192.0.2.2')];
  const plan = (c: typeof a, id: number) => outcomeOf(planItem(s.ctx, s.chain('devnet'), c, call(id, 'eth_chainId'), 'http'));
  t.same([plan(a, 1), plan(a, 2)], [{ outcome: 'ok' }, { outcome: 'ok' }]);
  t.same(plan(a, 3), {
    outcome: 'rate_limited -32005',
    message: "Rate limit exceeded: eth_chainId is limited to 2 requests per second per client IP ('eth_chainId' in public.method_limits)",
    retryAfterMs: 1000,
  });
  t.same(plan(b, 4), { outcome: 'ok' }, 'another IP has a window of its own');
});

/** A fleet limiter answering from a script of outcomes, per key, recording each take. */
function scriptedFleet(outcomes: Record<string, FleetTake[]>): FleetLimiter & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    take: (key) => {
      asked.push(key);
      return Promise.resolve(outcomes[key]?.shift() ?? { ok: true });
    },
    redisUp: () => true,
    instances: () => 1,
    ready: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
}

function emptyGrant(): Grant {
  return { requests: 0, retryAfterMs: 0, ru: Infinity, ruRetryAfterMs: 0, limitsUnavailable: false, storeDown: false, methods: null };
}

t.test("a fleet's grant: taken for the items the rps admitted, then spent in order by planning", async (t) => {
  const s = setup(t);
  const { caller } = keyedCaller(s, 'devnet', { plan: 'capped' });
  const limits = methodLimitsOf(s.ctx.config, caller)!;
  const chainIdKey = `m:${caller.limitKey}:eth_chainId`;
  const fleet = scriptedFleet({ [chainIdKey]: [{ ok: true }, { ok: false, retryAfterMs: 400 }] });
  const grant = emptyGrant();
  // Items 0..4: eth_chainId, an invalid item, eth_chainId, eth_chainId (its rps take refused), web3_sha3.
  const methods = ['eth_chainId', null, 'eth_chainId', 'eth_chainId', 'web3_sha3'];
  const passed = await takeMethodsInFleet(fleet, caller.limitKey, limits, methods, [0, 1, 2, 4], grant);
  t.same(passed, [0, 1, 4], 'the refused eth_chainId goes no further (no RU asked for it)');
  t.same(fleet.asked, [chainIdKey, chainIdKey, `m:${caller.limitKey}:web3_*`], 'one take per governed item the rps admitted');
  t.same(grant.methods?.left, [1, 0, 1]);

  const granted = { ...caller, grant };
  const plan = (id: number, method: string, params: unknown[] = []) =>
    outcomeOf(planItem(s.ctx, s.chain('devnet'), granted, call(id, method, params), 'http')).outcome;
  grant.requests = 10;
  t.equal(plan(1, 'eth_chainId'), 'ok');
  t.equal(plan(2, 'eth_chainId'), 'rate_limited -32005');
  t.equal(outcomeOf(planItem(s.ctx, s.chain('devnet'), granted, call(3, 'eth_chainId'), 'http')).retryAfterMs, 400, "Redis's wait");
  t.equal(plan(4, 'web3_sha3', ['0x']), 'ok');

  const down = emptyGrant();
  const closed = scriptedFleet({ [chainIdKey]: [UNAVAILABLE] });
  t.same(await takeMethodsInFleet(closed, caller.limitKey, limits, ['eth_chainId'], [0], down), []);
  t.equal(down.limitsUnavailable, true, 'Redis away with limits failing closed: the request is refused 503');
});
