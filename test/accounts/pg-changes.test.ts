/**
 * The fleet's change feed on a real PostgreSQL: what one instance commits, another hears within a second;
 * what rolls back, nobody hears; after the server restarts, listeners are told to read everything again.
 */
import { connect, createServer, type Socket } from 'node:net';
import pg from 'pg';
import t, { type Test } from 'tap';
import type { AccountStore } from '../../src/accounts/account-store.js';
import {
  CHANGES_CHANNEL,
  type ChangeListenerOptions,
  type ChangeNotice,
  listenForChanges,
  notifyChange,
} from '../../src/accounts/pg-changes.js';
import { createPostgresAccounts } from '../../src/accounts/postgres-accounts.js';
import { applyFencePatch, type FenceSettings } from '../../src/fences/settings.js';
import { openPgStore, type PgStore } from '../../src/store/pg-open.js';
import { inPgTransaction } from '../../src/store/pg-transaction.js';
import { hashKey } from '../../src/tenancy/keys.js';
import { startPostgres } from '../support/servers.js';

/** Notices as they arrive, and a wait for the next one that fails after `ms`. */
function inbox(): { push: (n: ChangeNotice) => void; next: (ms?: number) => Promise<ChangeNotice>; pending: () => number } {
  const queue: ChangeNotice[] = [];
  let waiter: ((n: ChangeNotice) => void) | null = null;
  return {
    push(n) {
      if (waiter !== null) {
        const w = waiter;
        waiter = null;
        w(n);
      } else queue.push(n);
    },
    next(ms = 1000) {
      const queued = queue.shift();
      if (queued !== undefined) return Promise.resolve(queued);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiter = null;
          reject(new Error(`no notice within ${ms} ms`));
        }, ms);
        waiter = (n) => {
          clearTimeout(timer);
          resolve(n);
        };
      });
    },
    pending: () => queue.length,
  };
}

async function until(done: () => boolean, ms = 1000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`not done within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Fleet {
  /** The instance that writes. */
  writer: AccountStore;
  writerStore: PgStore;
  /** What another instance hears. */
  heard: ReturnType<typeof inbox>;
  /** Every payload on the channel, raw, as any session of the database could read it. */
  raw: string[];
}

/**
 * A TCP relay to `port` whose connections can go silent (`freeze`: bytes either way are dropped, no FIN,
 * no reset), as through a dead NAT or a pulled cable; connections made after that work.
 */
async function silentRelay(t: Test, port: number): Promise<{ port: number; freeze: () => void }> {
  const pairs: Array<{ frozen: boolean; sockets: Socket[] }> = [];
  const relay = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    const pair = { frozen: false, sockets: [client, upstream] };
    pairs.push(pair);
    const forward = (from: Socket, to: Socket): void => {
      from.on('data', (b) => {
        if (!pair.frozen) to.write(b);
      });
      from.on('close', () => to.destroy());
      from.on('error', () => to.destroy());
    };
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const pair of pairs) for (const s of pair.sockets) s.destroy();
    relay.close();
  });
  return {
    port: (relay.address() as { port: number }).port,
    freeze: () => {
      for (const pair of pairs) pair.frozen = true;
    },
  };
}

/** One server for the file; each test's stores and listener are closed when it ends. */
const server = await startPostgres(t);

async function fleet(t: Test, options: ChangeListenerOptions = {}): Promise<Fleet> {
  const writerStore = await openPgStore(server.url);
  const readerStore = await openPgStore(server.url);
  const heard = inbox();
  const listener = await listenForChanges(readerStore, heard.push, options);
  const spy = new pg.Client({ connectionString: server.url });
  spy.on('error', () => {});
  await spy.connect();
  const raw: string[] = [];
  spy.on('notification', (m) => raw.push(m.payload ?? ''));
  await spy.query(`LISTEN ${CHANGES_CHANNEL}`);
  t.teardown(async () => {
    await spy.end().catch(() => {});
    await listener.close();
    await readerStore.close();
    await writerStore.close();
  });
  return { writer: createPostgresAccounts(writerStore), writerStore, heard, raw };
}

t.test('another instance hears of every write that changes what a key grants, never a key', async (t) => {
  const { writer: w, heard, raw } = await fleet(t);
  const { id: ownerId, managementKey } = await w.createOwner('acme', 'free', 10);
  const other = await w.createOwner('other', 'free', 10);
  const made = await w.createEndpoint(ownerId, 'mainnet', undefined, 10);
  if ('error' in made) throw new Error('refused');
  const endpointId = made.endpoint.id;
  t.same(await heard.next(), { kind: 'endpoint_created', endpointId, ownerId });

  // A change of restrictions or a rotation: the endpoint's keys are read again. A refused patch, or one that
  // changes nothing, sends nothing.
  const patch = (body: Record<string, unknown>) => (current: FenceSettings) => applyFencePatch(current, body);
  t.equal((await w.patchEndpointFences(ownerId, endpointId, patch({ allowed_ips: ['10.0.0.0/8'] })))?.ok, true);
  t.same(await heard.next(), { kind: 'endpoint_changed', endpointId, ownerId });
  t.equal((await w.patchEndpointFences(ownerId, endpointId, patch({ allowed_ips: [] })))?.ok, false);
  t.equal((await w.patchEndpointFences(ownerId, endpointId, patch({ allowed_ips: ['10.0.0.0/8'] })))?.ok, true);
  t.equal(await w.patchEndpointFences(other.id, endpointId, patch({ allowed_ips: null })), null);
  t.equal(await w.rotateEndpointKey(other.id, endpointId, 0), null);
  const rotated = await w.rotateEndpointKey(ownerId, endpointId, 60);
  t.same(await heard.next(), { kind: 'endpoint_changed', endpointId, ownerId }, 'the refused and idle writes sent nothing');

  t.equal(await w.deleteEndpoint(other.id, endpointId), false);
  t.equal(await w.setPlan(999, 'growth'), false);
  t.equal(await w.deleteEndpoint(ownerId, endpointId), true);
  t.same(await heard.next(), { kind: 'endpoint_deleted', endpointId, ownerId }, 'the refused writes sent nothing');

  t.ok(await w.setSuspended(ownerId, true));
  t.same(await heard.next(), { kind: 'owner_changed', ownerId });
  t.ok(await w.setSuspended(ownerId, false));
  t.same(await heard.next(), { kind: 'owner_changed', ownerId });
  t.ok(await w.setPlan(ownerId, 'growth'));
  t.same(await heard.next(), { kind: 'owner_changed', ownerId });
  t.ok(await w.topUp(ownerId, 5));
  t.ok(await w.createManagementKey(ownerId));
  t.same(await w.deleteOwner(ownerId), { endpoints: 0 });
  t.same(await heard.next(), { kind: 'owner_changed', ownerId }, 'top-ups and new management keys change no grant');
  t.equal(heard.pending(), 0);

  await until(() => raw.length >= 8);
  t.equal(raw.length, 8, 'the spy heard the same');
  for (const secret of [
    made.apiKey,
    made.apiKey.slice(0, 8),
    rotated!.apiKey,
    rotated!.apiKey.slice(0, 8),
    hashKey(rotated!.apiKey).toString('hex'),
    hashKey(made.apiKey).toString('hex'),
    managementKey,
    managementKey.slice(0, 8),
  ]) {
    t.notOk(
      raw.some((p) => p.includes(secret)),
      `no payload holds ${secret.slice(0, 4)}...`,
    );
  }
});

t.test('a write that rolls back is never heard', async (t) => {
  const { writer: w, writerStore, heard } = await fleet(t);
  const { id: ownerId } = await w.createOwner('acme', 'free', 10);
  await t.rejects(
    inPgTransaction(writerStore.pool, async (client) => {
      await notifyChange(client, { kind: 'owner_changed', ownerId: 999 });
      throw new Error('changed my mind');
    }),
    { message: 'changed my mind' },
  );
  t.ok(await w.setSuspended(ownerId, true));
  t.same(await heard.next(), { kind: 'owner_changed', ownerId }, 'the committed write arrives, the rolled-back one never did');
  t.equal(heard.pending(), 0);
});

t.test('a payload that does not parse is dropped with its reason, never read as a resync', async (t) => {
  const ignored: string[] = [];
  const { writerStore, heard } = await fleet(t, { onIgnored: (reason) => ignored.push(reason) });
  const junk: Array<[string, string]> = [
    ['garbage', 'not_json'],
    ['42', 'bad_shape'],
    ['{"kind":"owner_renamed","ownerId":1}', 'unknown_kind'],
    ['{"kind":"endpoint_deleted","ownerId":1}', 'bad_shape'],
    ['{"kind":"owner_changed","ownerId":"1"}', 'bad_shape'],
  ];
  for (const [payload] of junk) await writerStore.pool.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, payload]);
  await notifyChange(writerStore.pool as unknown as pg.ClientBase, { kind: 'owner_changed', ownerId: 7 });
  t.same(await heard.next(), { kind: 'owner_changed', ownerId: 7 }, 'the one that parses, alone');
  t.same(
    ignored,
    junk.map(([, reason]) => reason),
    'each of the others dropped, with why',
  );
  t.equal(heard.pending(), 0);
});

t.test('after the server restarts the listener reconnects and asks for a resync', async (t) => {
  let downs = 0;
  let ups = 0;
  const { writer: w, heard } = await fleet(t, {
    minBackoffMs: 50,
    maxBackoffMs: 200,
    onDown: () => downs++,
    onUp: () => ups++,
  });
  const { id: ownerId } = await w.createOwner('acme', 'free', 10);
  await server.stop();
  await server.start();
  t.same(await heard.next(5000), { kind: 'resync' });
  t.equal(downs, 1, 'down once');
  t.equal(ups, 1, 'up once');
  t.ok(await w.setPlan(ownerId, 'growth'));
  t.same(await heard.next(), { kind: 'owner_changed', ownerId }, 'changes are heard again');
});

t.test('a connection gone silent fails its check and is replaced', async (t) => {
  const relay = await silentRelay(t, server.port);
  const store = await openPgStore(`postgres://chaingate@127.0.0.1:${relay.port}/chaingate`);
  const downs: string[] = [];
  const heard = inbox();
  const listener = await listenForChanges(store, heard.push, {
    checkIntervalMs: 100,
    minBackoffMs: 20,
    onDown: (err) => downs.push(err.message),
  });
  t.teardown(async () => {
    await listener.close();
    await store.close();
  });
  // Two more connections, idle in the pool when the relay goes silent: the feed must not wait on them either.
  await Promise.all([0, 1].map(() => store.pool.query('SELECT pg_sleep(0.05)')));
  t.equal(store.pool.idleCount, 2);
  relay.freeze();
  t.same(await heard.next(3000), { kind: 'resync' }, 'listening again on a new connection');
  t.same(downs, ['the change feed connection did not answer within 100 ms']);
  const writer = await openPgStore(server.url);
  t.teardown(() => writer.close());
  const accounts = createPostgresAccounts(writer);
  const { id: ownerId } = await accounts.createOwner('acme', 'free', 1);
  t.ok(await accounts.setSuspended(ownerId, true));
  t.same(await heard.next(), { kind: 'owner_changed', ownerId });
});

t.test('closing the listener stops the notices and gives its connection back', async (t) => {
  const store = await openPgStore(server.url, { maxConnections: 1 });
  const heard = inbox();
  const listener = await listenForChanges(store, heard.push);
  const accounts = createPostgresAccounts(store);
  t.equal(store.pool.totalCount, 1, 'the feed holds the one connection');
  await listener.close();
  await listener.close();
  const { id } = await accounts.createOwner('acme', 'free', 1);
  t.ok(await accounts.setPlan(id, 'growth'), 'the pool has a connection for the write');
  const listening = await store.pool.query<{ n: number }>('SELECT count(*) AS n FROM pg_listening_channels()');
  t.same(listening.rows, [{ n: 0 }], 'the connection given back does not listen');
  t.equal(heard.pending(), 0);
  await accounts.close();
  await accounts.close();
  t.equal(store.pool.ending, true);
});
