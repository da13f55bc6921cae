/**
 * Who is calling: resolveCaller and chainOfKey against a real SQLite directory, with the unknown-key
 * guard on a test clock.
 */
import t from 'tap';
import { chainOfKey, resolveCaller } from '../../src/pipeline/caller.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { grantKey } from '../support/key-grants.js';
import { keyedCaller, pipelineContext } from '../support/pipeline-context.js';

const CHAINS = {
  devnet: { chain_id: 31337, upstreams: [{ url: 'http://127.0.0.1:1' }] },
  other: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] },
};
const PLANS = { free: { rps: 100, max_endpoints: 10 }, premium: { rps: 5000, ru_per_second: 1000, max_endpoints: 10 } };

/** A resolveCaller result without the caller's tally (its counting, made anew each time), for t.same. */
function untallied(r: ReturnType<typeof resolveCaller>): unknown {
  if (r.kind === 'refused') return r;
  const { tally: _tally, ...caller } = r.caller;
  return { ...r, caller };
}

t.test("resolveCaller: no key is the public path of the route's chain, limited by IP", async (t) => {
  const cases: Array<[{ public: number; server: number }, number]> = [
    [{ public: 10, server: 1000 }, 10],
    [{ public: 50, server: 20 }, 20],
  ];
  for (const [batch, maxBatch] of cases) {
    const s = pipelineContext(t, {
      chains: CHAINS,
      plans: PLANS,
      public: { rps_per_ip: 7, max_batch: batch.public },
      server: { default_chain: 'devnet', max_batch: batch.server },
    });
    let asked = 0;
    const r = resolveCaller(s.ctx, s.chain('other'), null, true, () => {
      asked++;
      return '203.0.113.5';
    });
    t.same(
      untallied(r),
      {
        kind: 'caller',
        chain: s.chain('other'),
        caller: { auth: null, key: null, plan: null, limitKey: 'ip:203.0.113.5', rps: 7, maxBatch },
      },
      `max_batch ${batch.public} / ${batch.server}`,
    );
    t.equal(asked, 1, 'the IP is read once');
  }
});

t.test('resolveCaller: a key is its endpoint on its own network, under its plan', async (t) => {
  const s = pipelineContext(t, { chains: CHAINS, plans: PLANS, server: { default_chain: 'devnet', max_batch: 500 } });
  const { apiKey, caller, ownerId } = keyedCaller(s, 'devnet', { plan: 'premium' });
  const endpointId = caller.auth!.endpointId;
  const expected = {
    kind: 'caller',
    chain: s.chain('devnet'),
    caller: {
      auth: { endpointId, ownerId, network: 'devnet', plan: 'premium', suspended: false, fences: null, keyExpiresAtMs: null },
      key: apiKey,
      plan: s.ctx.config.plans.premium,
      limitKey: `ep:${endpointId}`,
      rps: 5000,
      maxBatch: 500,
    },
  };
  const noIp = (): string => {
    throw new Error('a valid key needs no IP');
  };
  t.same(untallied(resolveCaller(s.ctx, s.chain('devnet'), apiKey, true, noIp)), expected, "on its chain's path");
  t.same(
    untallied(resolveCaller(s.ctx, s.chain('other'), apiKey, false, noIp)),
    expected,
    "on an unnamed path: its own chain, not the route's",
  );
  t.same(
    resolveCaller(s.ctx, s.chain('other'), apiKey, true, noIp),
    {
      kind: 'refused',
      error: 'unauthorized',
      message: "This API key belongs to network 'devnet', not 'other': call it on its endpoint's URL",
    },
    "on another chain's path: 401 naming its network",
  );
  t.equal(chainOfKey(s.ctx, apiKey), s.chain('devnet'));
});

t.test('resolveCaller: unknown keys are 401, then 429 once an IP has tried too many this minute', async (t) => {
  const s = pipelineContext(t, { chains: CHAINS, plans: PLANS, server: { default_chain: 'devnet' } });
  const { apiKey } = keyedCaller(s, 'devnet');
  const devnet = s.chain('devnet');
  const guess = (i: number, ip = '198.51.100.7'): unknown =>
    resolveCaller(s.ctx, devnet, `${'x'.repeat(28)}${String(i).padStart(4, '0')}`, true, () => ip);
  for (let i = 0; i < 20; i++) t.same(guess(i), { kind: 'refused', error: 'unauthorized' }, `guess ${i + 1}`);
  t.same(guess(20), { kind: 'refused', error: 'rate_limited' }, 'the 21st within the minute');
  t.same(guess(21, '198.51.100.8'), { kind: 'refused', error: 'unauthorized' }, 'another IP is counted apart');
  t.match(
    resolveCaller(s.ctx, devnet, apiKey, true, () => '198.51.100.7'),
    { caller: { limitKey: /^ep:ep_/ } },
    'a valid key from that IP still works',
  );
  s.clock.now += 60_000;
  t.same(guess(22), { kind: 'refused', error: 'unauthorized' }, 'the next minute starts afresh');
  t.equal(chainOfKey(s.ctx, `${'x'.repeat(32)}`), undefined);
});

t.test('resolveCaller: a key whose network or plan the config does not have is 401', async (t) => {
  const s = pipelineContext(t, { chains: CHAINS, plans: PLANS, server: { default_chain: 'devnet' } });
  const gone = keyedCaller(s, 'mainnet');
  t.same(
    resolveCaller(s.ctx, s.chain('devnet'), gone.apiKey, false, () => '192.0.2.1'),
    { kind: 'refused', error: 'unauthorized' },
    'a network no longer configured',
  );
  t.equal(chainOfKey(s.ctx, gone.apiKey), undefined);
  const owner = createOwnerAdmin(s.ctx.tenancy.store!).createOwner('gold', 'gold', 100).id;
  const made = s.ctx.tenancy.directory!.createEndpoint(owner, 'devnet', undefined, 10);
  if ('error' in made) throw new Error(made.error);
  t.same(
    resolveCaller(s.ctx, s.chain('devnet'), made.apiKey, true, () => '192.0.2.1'),
    { kind: 'refused', error: 'unauthorized' },
    'a plan no longer configured',
  );
});

t.test("resolveCaller: a suspended owner's key is 403; a rotated key is 401 once its grace ends, by the context's clock", async (t) => {
  const s = pipelineContext(t, { chains: CHAINS, plans: PLANS, server: { default_chain: 'devnet' } });
  const { apiKey } = keyedCaller(s, 'devnet');
  const devnet = s.chain('devnet');
  const ip = (): string => '198.51.100.9';
  grantKey(s.ctx.tenancy.keys, apiKey, { suspended: true });
  t.same(resolveCaller(s.ctx, devnet, apiKey, true, ip), { kind: 'refused', error: 'owner_suspended' }, 'suspended: 403, not 401');
  grantKey(s.ctx.tenancy.keys, apiKey, { keyExpiresAtMs: s.clock.now + 1000 });
  t.match(resolveCaller(s.ctx, devnet, apiKey, true, ip), { kind: 'caller' }, 'within its grace');
  s.clock.now += 999;
  t.match(resolveCaller(s.ctx, devnet, apiKey, true, ip), { kind: 'caller' }, 'a millisecond before its end');
  s.clock.now += 1;
  t.same(resolveCaller(s.ctx, devnet, apiKey, true, ip), { kind: 'refused', error: 'unauthorized' }, 'at its end: as an unknown key');
  grantKey(s.ctx.tenancy.keys, apiKey, { keyExpiresAtMs: s.clock.now - 1, suspended: true });
  t.same(
    resolveCaller(s.ctx, devnet, apiKey, true, ip),
    { kind: 'refused', error: 'unauthorized' },
    'an ended key is unknown, suspended or not',
  );
});
