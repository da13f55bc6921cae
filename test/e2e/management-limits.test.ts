/**
 * The management API's own limits: a request rate per IP and per owner's keys, the unknown-key throttle
 * the JSON-RPC paths have, and endpoint lists in pages.
 */
import t from 'tap';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { send } from '../support/rpc.js';
import { clearOfMinuteEnd } from '../support/wait-for.js';

// No call here reaches a node: a closed port is upstream enough.
const CHAINS = { devnet: evmChain(['http://127.0.0.1:1']) };

function owner(g: TestGateway, name: string, plan = 'free'): { id: number; key: string } {
  const made = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner(name, plan, 1000);
  return { id: made.id, key: made.managementKey };
}

const get = (g: TestGateway, path: string, key: string, ip = '10.2.0.1') =>
  send('GET', `${g.base}${path}`, undefined, { authorization: `Bearer ${key}`, 'x-forwarded-for': ip });

/** `n` requests one after the other, as fast as they are answered (well within a second). */
async function inARow(n: number, call: () => ReturnType<typeof send>) {
  const answers = [];
  for (let i = 0; i < n; i++) answers.push(await call());
  return answers;
}

t.test('a request rate per IP and per key, with Retry-After; other IPs and owners go on', async (t) => {
  const g = await gatewayFor(t, { server: { trust_proxy: true }, chains: CHAINS, management: { rps_per_ip: 6, rps_per_key: 3 } });
  const alice = owner(g, 'alice');
  const bob = owner(g, 'bob');
  const a = await inARow(4, () => get(g, '/api/dashboard/account', alice.key));
  t.same(
    a.map((r) => r.status),
    [200, 200, 200, 429],
    "the owner's fourth request in a second is 429",
  );
  t.same(a[3]!.json, {
    error: { code: 'rate_limited', message: 'Too many management requests (the limit is 3 per second per key: management.rps_per_key)' },
  });
  t.ok(Number(a[3]!.headers['retry-after']) >= 1, 'with Retry-After');
  const b = await inARow(3, () => get(g, '/api/dashboard/account', bob.key));
  t.same(
    b.map((r) => r.status),
    [200, 200, 429],
    "another owner has its own rate; the IP's sixth request is refused",
  );
  t.match(b[2]!.json, { error: { code: 'rate_limited', message: /6 per second per IP: management\.rps_per_ip/ } });
  const elsewhere = await get(g, '/api/dashboard/account', bob.key, '10.2.0.2');
  t.equal(elsewhere.status, 200, 'another IP is not held back');
});

t.test('invalid management keys are throttled per IP as unknown API keys are; valid keys keep working', async (t) => {
  const g = await gatewayFor(t, { server: { trust_proxy: true }, chains: CHAINS });
  const alice = owner(g, 'alice');
  await clearOfMinuteEnd();
  const statuses: number[] = [];
  for (let i = 0; i < 22; i++) statuses.push((await get(g, '/api/dashboard/account', `${'x'.repeat(47)}${i % 10}`, '10.3.0.1')).status);
  t.same(statuses.slice(0, 20), Array(20).fill(401), '20 wrong keys a minute get 401');
  t.same(statuses.slice(20), [429, 429], 'then 429');
  const none = await send('GET', `${g.base}/api/dashboard/account`, undefined, { 'x-forwarded-for': '10.3.0.1' });
  t.equal(none.status, 429, 'no key at all counts as a wrong one');
  t.equal((await get(g, '/api/dashboard/account', alice.key, '10.3.0.1')).status, 200, 'a valid key from the same IP still works');
  t.equal((await get(g, '/api/dashboard/account', 'y'.repeat(48), '10.3.0.2')).status, 401, 'another IP still gets 401');
});

t.test('GET /api/dashboard/endpoints in pages: limit and cursor, the first page as before', async (t) => {
  const g = await gatewayFor(t, { chains: CHAINS, plans: { big: { rps: 10, max_endpoints: 500 } } });
  const o = owner(g, 'many', 'big');
  const directory = g.gateway.context.tenancy.directory!;
  const made: string[] = [];
  for (let i = 0; i < 230; i++) {
    const r = directory.createEndpoint(o.id, 'devnet', `e${i}`, 500);
    if ('error' in r) throw new Error(r.error);
    made.push(r.endpoint.id);
  }
  const expected = directory.listEndpoints(o.id).map((e) => e.id);
  t.same([...expected].sort(), [...made].sort());
  type Page = { data: Array<{ id: string; name: string }>; next_cursor?: string };
  const first = await get(g, '/api/dashboard/endpoints', o.key);
  t.equal(first.status, 200);
  const p1 = first.json as Page;
  t.equal(p1.data.length, 100, 'the first page has 100 endpoints by default');
  t.same(
    Object.keys(p1.data[0]!).sort(),
    [
      'allow_no_origin',
      'allowed_contracts',
      'allowed_ips',
      'allowed_methods',
      'allowed_origins',
      'created_at',
      'id',
      'jwt_keys',
      'jwt_max_lifetime_s',
      'key_in_path',
      'key_prefix',
      'name',
      'network',
      'previous_key_expires_at',
      'previous_key_prefix',
    ],
    'each in the same shape as an unpaged list',
  );
  t.type(p1.next_cursor, 'string');
  const seen = [...p1.data.map((e) => e.id)];
  let cursor = p1.next_cursor;
  // An endpoint deleted between two pages changes nothing for the pages after it.
  t.ok(directory.deleteEndpoint(o.id, seen[99]!));
  const sizes: number[] = [];
  while (cursor !== undefined) {
    const r = await get(g, `/api/dashboard/endpoints?cursor=${encodeURIComponent(cursor)}`, o.key);
    t.equal(r.status, 200);
    const page = r.json as Page;
    sizes.push(page.data.length);
    seen.push(...page.data.map((e) => e.id));
    cursor = page.next_cursor;
  }
  t.same(sizes, [100, 30], 'then 100 and 30; the last page has no next_cursor');
  t.same(seen, expected, 'every endpoint once, in order');
  const all = (await get(g, '/api/dashboard/endpoints?limit=1000', o.key)).json as Page;
  t.equal(all.data.length, 229, 'limit=1000 takes them all in one page');
  t.notOk('next_cursor' in all);
  const small = (await get(g, '/api/dashboard/endpoints?limit=7', o.key)).json as Page;
  t.same(
    small.data.map((e) => e.id),
    expected.filter((id) => id !== seen[99]).slice(0, 7),
  );
  for (const [query, message] of [
    ['limit=0', /'limit' must be an integer from 1 to 1000/],
    ['limit=1001', /from 1 to 1000/],
    ['limit=abc', /from 1 to 1000/],
    ['cursor=nonsense', /'cursor' is not one this API gave/],
    ['limit=5&limit=6', /'limit' is given more than once/],
  ] as const) {
    const r = await get(g, `/api/dashboard/endpoints?${query}`, o.key);
    t.equal(r.status, 400, `${query}: 400`);
    t.match(r.json, { error: { code: 'bad_request', message } });
  }
  const other = owner(g, 'other');
  const foreign = await get(g, `/api/dashboard/endpoints?cursor=${encodeURIComponent(p1.next_cursor!)}`, other.key);
  t.same(foreign.json, { data: [] }, "a cursor shows nothing of another owner's endpoints");
});
