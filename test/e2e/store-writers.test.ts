/**
 * The gateway's own threads write to one SQLite file (the ledger's flush on the main thread, the
 * management routes on each worker): they must never lock each other out, however many writes come at
 * once. Only a connection outside the gateway (test/e2e/store-faults.test.ts) may make a write fail.
 */
import t from 'tap';
import { Agent } from 'node:http';
import type { Store } from '../../src/store/open.js';
import { newEndpointId } from '../../src/tenancy/endpoints.js';
import { newKey } from '../../src/tenancy/keys.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { hammer } from '../support/daemon.js';
import { evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { send } from '../support/rpc.js';

// eth_chainId is answered by the gateway itself (5 RU): keyed load without a node behind it.
const CHAINS = { devnet: evmChain(['http://127.0.0.1:1']) };
const CONCURRENT = 32;
/** How long the 32 lanes of creates and deletes run. */
const LANES_MS = 8_000;
const KEYED_LOOPS = 8;
/**
 * The endpoints the managed owner has already: a create counts them under the write lock (its plan's
 * max_endpoints), so at 20,000 each holds the lock for milliseconds, as in the report that found this.
 */
const EXISTING = 20_000;

/** `n` endpoints of `ownerId` in one transaction, straight into the table (the API would take minutes), before any other write. */
function addEndpoints(store: Store, ownerId: number, n: number): void {
  const at = Math.floor(Date.now() / 1000);
  store.db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const key = newKey('api');
      store.sql.directory.insertEndpoint.run(newEndpointId(), ownerId, 'devnet', null, key.hash, key.prefix, at, null);
    }
  })();
}

function api(g: TestGateway, agent: Agent, key: string, method: string, path: string, body?: unknown) {
  return send(
    method,
    `${g.base}${path}`,
    body === undefined ? undefined : JSON.stringify(body),
    { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    agent,
  );
}

t.test('32 concurrent endpoint creates and deletes under keyed load on two workers: every answer 2xx', async (t) => {
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: CHAINS,
    plans: { big: { rps: 1_000_000, max_endpoints: 1_000_000 } },
  });
  const store = g.gateway.context.tenancy.store!;
  const admin = createOwnerAdmin(store);
  const loaded = admin.createOwner('loaded', 'big', 1_000_000_000);
  const managed = admin.createOwner('managed', 'big', 0);
  addEndpoints(store, managed.id, EXISTING);
  const first = await send('POST', `${g.base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet' }), {
    authorization: `Bearer ${loaded.managementKey}`,
    'content-type': 'application/json',
  });
  t.equal(first.status, 201);
  const keyedUrl = `${g.base}/v1/rpc/${(first.json as { data: { api_key: string } }).data.api_key}`;

  // Keyed calls all along: each is debited, so the main thread's ledger flush writes every interval.
  let done = false;
  const keyedStatuses = new Map<number, number>();
  const load = Promise.all(
    Array.from({ length: KEYED_LOOPS }, () =>
      hammer(
        keyedUrl,
        () => done,
        (s) => keyedStatuses.set(s, (keyedStatuses.get(s) ?? 0) + 1),
      ),
    ),
  );
  t.teardown(() => {
    done = true;
  });

  // Kept-alive connections, spread over both workers by the kernel as they are opened.
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENT });
  t.teardown(() => agent.destroy());
  const statuses = new Map<number, number>();
  const failures: string[] = [];
  const note = (r: { status: number; text: string }): void => {
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    if (r.status < 200 || r.status > 299) failures.push(`${r.status} ${r.text}`);
  };
  // 32 lanes, each a create then a delete of what it made, again and again: creates and deletes overlap.
  let pairs = 0;
  const until = Date.now() + LANES_MS;
  const lane = async (): Promise<void> => {
    while (Date.now() < until) {
      const made = await api(g, agent, managed.managementKey, 'POST', '/api/dashboard/endpoints', { network: 'devnet' });
      note(made);
      if (made.status !== 201) continue;
      const id = (made.json as { data: { id: string } }).data.id;
      note(await api(g, agent, managed.managementKey, 'DELETE', `/api/dashboard/endpoints?id=${id}`));
      pairs++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENT }, lane));
  done = true;
  const keyedOk = (await load).reduce((a, b) => a + b, 0);

  t.same(failures.slice(0, 3), [], `every create and delete answered 2xx (${pairs} pairs: ${JSON.stringify([...statuses])})`);
  t.ok(pairs >= 3 * CONCURRENT, `at least 3 creates and deletes per lane (${pairs} in all)`);
  t.ok(keyedOk >= 50, `the keyed load ran meanwhile (${keyedOk} answers 200)`);
  t.same([...keyedStatuses.keys()], [200], `every keyed call answered 200 (${JSON.stringify([...keyedStatuses])})`);
  t.equal(admin.listEndpoints(managed.id).length, EXISTING, 'every endpoint made was deleted');
});
