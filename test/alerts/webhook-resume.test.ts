import t, { type Test } from 'tap';
import type { AccountStore } from '../../src/accounts/account-store.js';
import { createPostgresAccounts } from '../../src/accounts/postgres-accounts.js';
import { createSqliteAccounts } from '../../src/accounts/sqlite-accounts.js';
import type { DeliveryRecord } from '../../src/accounts/webhook-store.js';
import { type AlertWatch, type AlertWatchDeps, startAlertWatch } from '../../src/alerts/alert-watch.js';
import { postOnce } from '../../src/alerts/delivery.js';
import { verifyDelivery } from '../../src/alerts/signature.js';
import { openPgStore } from '../../src/store/pg-open.js';
import { startPostgres } from '../support/servers.js';
import { webhookReceiver } from '../support/webhook-receiver.js';
import { waitFor } from '../support/wait-for.js';
import { tempDbPath, tempStore } from '../store/temp-store.js';

const SECRET = 'a-secret-of-the-owner-1234';

/** Opens the account store once more on the same database: another sender, as a restart or a fleet has. */
type Opener = (t: Test) => Promise<AccountStore>;

const ENGINES: Record<string, (t: Test) => Promise<Opener>> = {
  sqlite: async (t) => {
    const path = tempDbPath(t);
    return async (t) => createSqliteAccounts(tempStore(t, path));
  },
  postgres: async (t) => {
    const server = await startPostgres(t);
    return async (t) => {
      const pg = await openPgStore(server.url, { connectTimeoutMs: 2000 });
      t.teardown(() => (pg.pool.ending ? undefined : pg.close()));
      return createPostgresAccounts(pg);
    };
  },
};

function sender(t: Test, accounts: AccountStore, over: Partial<AlertWatchDeps> = {}, retryForS = 30): AlertWatch {
  return startAlertWatch({
    store: accounts.webhooks,
    balance: () => 10,
    settings: () => ({ allow_private: true, timeout_ms: 2000, retry_for_s: retryForS, check_interval_s: 3600 }),
    onError: (err) => t.fail(err.message),
    ...over,
  });
}

for (const [engine, start] of Object.entries(ENGINES)) {
  t.test(engine, async (t) => {
    const open = await start(t);
    const first = await open(t);

    /** An owner with a balance_low webhook to `url` (its balance, 10, is below 50: the first check alerts). */
    async function hookTo(name: string, url: string): Promise<{ ownerId: number; hookId: string }> {
      const owner = await first.createOwner(name, 'free', 100);
      const spec = {
        url,
        events: ['balance_low' as const],
        secret: SECRET,
        balanceBelowRu: 50,
        refusedPerMinute: null,
        errorRateAbove: null,
      };
      const made = await first.webhooks.create(owner.id, spec, 10);
      if (made.kind !== 'created') throw new Error('the webhook was refused');
      return { ownerId: owner.id, hookId: made.webhook.id };
    }
    const deliveriesOf = async (h: { ownerId: number; hookId: string }): Promise<DeliveryRecord[]> =>
      (await first.webhooks.deliveries(h.ownerId, h.hookId, 10))!;

    /**
     * A sender that stops (as the daemon does) right after its first attempt was answered: the delivery is
     * left pending with one attempt. `post` stands for the first attempt (the real one by default).
     */
    async function stoppedMidRetry(t: Test, h: { ownerId: number; hookId: string }, post = postOnce): Promise<void> {
      let stopping: Promise<void> | null = null;
      const a: AlertWatch = sender(t, first, {
        post: async (...args) => {
          const answer = await post(...args);
          stopping ??= a.close();
          return answer;
        },
      });
      await a.check();
      await waitFor(() => stopping !== null, { what: 'the first attempt' });
      await stopping;
      const [d] = await deliveriesOf(h);
      t.match(d, { outcome: 'pending', attempts: 1 }, 'left pending after one attempt');
    }

    t.test('stopped mid-retry: two new senders on the same store complete it once, signed', async (t) => {
      const r = await webhookReceiver(t, [500]);
      const h = await hookTo('alice', r.url);
      await stoppedMidRetry(t, h);
      t.equal(r.got.length, 1, 'the first attempt was answered 500');
      // Both started in one tick, so both find the delivery stalled before either claims it.
      const stores = [await open(t), await open(t)];
      const senders = stores.map((s) => sender(t, s));
      await waitFor(async () => (await deliveriesOf(h))[0]!.outcome === 'delivered', { ms: 10_000, what: 'the delivery resumed' });
      await Promise.all(senders.map((s) => s.check()));
      await Promise.all(senders.map((s) => s.close()));
      t.equal(r.got.length, 2, 'sent once more, by one sender');
      const [d] = await deliveriesOf(h);
      t.match(d, { outcome: 'delivered', attempts: 2, httpStatus: 200, error: null });
      const again = r.got[1]!;
      t.equal(again.body, r.got[0]!.body, 'the same body');
      t.equal(JSON.parse(again.body).id, d!.id);
      t.equal(again.headers['x-chaingate-delivery'], String(d!.id));
      const ts = again.headers['x-chaingate-timestamp'] as string;
      t.ok(verifyDelivery(SECRET, ts, again.body, again.headers['x-chaingate-signature'] as string), 'the signature verifies');
    });

    t.test("a live sender's delivery is not taken over: its lease is renewed with each attempt", async (t) => {
      const r = await webhookReceiver(t, [500]);
      const h = await hookTo('dave', r.url);
      const posts = { a: 0, other: 0 };
      const counted = (who: keyof typeof posts): Partial<AlertWatchDeps> => ({
        post: (...args) => {
          posts[who]++;
          return postOnce(...args);
        },
      });
      const a = sender(t, first, counted('a'));
      t.teardown(() => a.close());
      await a.check();
      await waitFor(async () => (await deliveriesOf(h))[0]?.attempts === 1, { what: 'the first attempt' });
      const other = sender(t, await open(t), counted('other'));
      await other.check();
      await waitFor(async () => (await deliveriesOf(h))[0]!.outcome === 'delivered', { ms: 10_000, what: 'the retry' });
      await Promise.all([a.close(), other.close()]);
      t.same(posts, { a: 2, other: 0 }, 'both attempts by its own sender');
      t.equal(r.got.length, 2);
    });

    t.test('a crashed sender (never let go): once its lease ended another resumes the delivery', async (t) => {
      const r = await webhookReceiver(t);
      const h = await hookTo('bob', r.url);
      let calls = 0;
      // The first attempt is answered 500; the second never ends, as a process that died holds nothing.
      const dead = sender(t, first, {
        post: () => (calls++ === 0 ? Promise.resolve({ status: 500 }) : new Promise(() => {})),
      });
      await dead.check();
      await waitFor(async () => (await deliveriesOf(h))[0]?.attempts === 1, { what: 'the first attempt' });
      const later = sender(t, await open(t), { now: () => Date.now() + 120_000 }, 3600);
      t.teardown(() => later.close());
      await waitFor(async () => (await deliveriesOf(h))[0]!.outcome === 'delivered', { ms: 10_000, what: 'the delivery resumed' });
      t.equal(r.got.length, 1);
      const got = r.got[0]!;
      const ts = got.headers['x-chaingate-timestamp'] as string;
      t.ok(verifyDelivery(SECRET, ts, got.body, got.headers['x-chaingate-signature'] as string), 'the signature verifies');
      t.match(await deliveriesOf(h), [{ outcome: 'delivered', attempts: 2 }]);
    });

    t.test('one whose retry window passed while stopped is marked failed, as interrupted', async (t) => {
      const r = await webhookReceiver(t, [500]);
      const h = await hookTo('carol', r.url);
      await stoppedMidRetry(t, h);
      const later = sender(t, await open(t), { now: () => Date.now() + 60_000 });
      await waitFor(async () => (await deliveriesOf(h))[0]!.outcome === 'failed', { what: 'the delivery failed' });
      await later.close();
      t.equal(r.got.length, 1, 'not sent again');
      const [d] = await deliveriesOf(h);
      t.match(d, { attempts: 1, httpStatus: 500 });
      t.match(d!.error, /^interrupted .*webhooks\.retry_for_s \(30 s\).*answered HTTP 500/);
    });
  });
}
