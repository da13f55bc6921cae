// The fleet limiter against a real Redis that stops, hangs and comes back: shared limits while it answers;
// while it does not, takes answered at once from local windows with the limit divided by the live instances
// (or UNAVAILABLE with failure 'closed'), the state told once per change; shared again within 5 s of its return.
import t, { type Test } from 'tap';
import { Redis } from 'ioredis';
import {
  createFleetLimiter,
  type FleetLimiter,
  type FleetLimiterOptions,
  type FleetTake,
  UNAVAILABLE,
} from '../../src/limits/fleet-limiter.js';
import { waitFor } from '../support/wait-for.js';
import { freePort, startRedis } from '../support/servers.js';

const server = await startRedis(t);
const admin = new Redis(server.url);
admin.on('error', () => {}); // reconnects on its own while the server is stopped
t.teardown(() => admin.disconnect());

interface Instance {
  limiter: FleetLimiter;
  /** What onStateChange was told, in order. */
  states: boolean[];
  causes: Array<Error | undefined>;
}

function instance(t: Test, opts: Partial<FleetLimiterOptions> = {}): Instance {
  const states: boolean[] = [];
  const causes: Array<Error | undefined> = [];
  const onStateChange = (up: boolean, cause?: Error) => {
    states.push(up);
    causes.push(cause);
  };
  const limiter = createFleetLimiter({ url: server.url, heartbeatMs: 200, onStateChange, ...opts });
  t.teardown(() => limiter.close());
  return { limiter, states, causes };
}

function fakeClock(): { now: () => number; advance(ms: number): void } {
  let at = 0;
  return {
    now: () => at,
    advance: (ms) => {
      at += ms;
    },
  };
}

/** `n` takes of one unit issued in one turn; how many were admitted. */
async function admitted(limiter: FleetLimiter, key: string, limit: number, n: number): Promise<number> {
  const answers: FleetTake[] = await Promise.all(Array.from({ length: n }, () => limiter.take(key, limit)));
  return answers.filter((r) => r.ok).length;
}

t.test('shared while Redis answers, the local share while it is stopped, shared again within 5 s', async (t) => {
  const clock = fakeClock();
  const a = instance(t, { now: clock.now });
  const b = instance(t, { now: clock.now });
  await Promise.all([a.limiter.ready(), b.limiter.ready()]);
  t.same(a.states, [true], 'the first state is told');
  await waitFor(() => a.limiter.instances() === 2 && b.limiter.instances() === 2, { what: 'both instances in the roll call' });
  const shared = await Promise.all([admitted(a.limiter, 'ep:1', 10, 10), admitted(b.limiter, 'ep:1', 10, 10)]);
  t.equal(shared[0] + shared[1], 10, 'one window for both instances');

  await server.stop();
  const asked = performance.now();
  const local = await Promise.all([admitted(a.limiter, 'ep:2', 10, 8), admitted(b.limiter, 'ep:2', 10, 8)]);
  const took = performance.now() - asked;
  t.same(local, [5, 5], 'each instance admits its half of the limit');
  t.ok(took < 150, `answered in ${took.toFixed(1)} ms`);
  t.equal(a.limiter.redisUp(), false);
  t.same(a.states, [true, false], 'the change is told once');
  t.same(await a.limiter.take('ep:3', 10, 6), { ok: false, retryAfterMs: 1000 }, 'more than the share but within the plan: a second');
  t.same(await a.limiter.take('ep:3', 10, 11), { ok: false, retryAfterMs: Infinity }, 'more than the plan: no wait helps');
  t.throws(() => a.limiter.take('ep:3', 0), RangeError);
  clock.advance(1000);
  t.equal(await admitted(a.limiter, 'ep:2', 10, 8), 5, 'the local window slides on the injected clock');
  // Probes keep failing meanwhile and the takes keep answering from the local share.
  await new Promise((r) => setTimeout(r, 600));
  t.equal(await admitted(a.limiter, 'ep:4', 10, 8), 5);
  t.same(a.states, [true, false], 'failed probes tell nothing new');

  await server.start();
  const restarted = performance.now();
  await waitFor(() => a.limiter.redisUp() && b.limiter.redisUp(), { what: 'shared limits again', ms: 5000 });
  t.comment(`shared again ${Math.round(performance.now() - restarted)} ms after Redis started`);
  t.same(a.states, [true, false, true]);
  const again = await Promise.all([admitted(a.limiter, 'ep:4', 10, 10), admitted(b.limiter, 'ep:4', 10, 10)]);
  t.equal(again[0] + again[1], 10, 'one window for both again');
  t.equal(await admin.exists('chaingate:rl:ep:4'), 1, 'kept in Redis');

  await b.limiter.close();
  t.equal(await admin.zcard('chaingate:instances'), 1, 'a closed instance leaves the roll call');
  await waitFor(() => a.limiter.instances() === 1, { what: 'one instance live' });
});

t.test('a Redis that hangs: takes answer from the local share after the command timeout', async (t) => {
  const a = instance(t);
  await a.limiter.ready();
  await admin.client('PAUSE', 700, 'ALL');
  const asked = performance.now();
  const take = await a.limiter.take('ep:hang', 10);
  const took = performance.now() - asked;
  t.same(take, { ok: true }, 'admitted locally');
  t.ok(took < 600, `answered in ${took.toFixed(0)} ms (command timeout 200 ms)`);
  t.equal(a.limiter.redisUp(), false);
  await waitFor(() => a.limiter.redisUp(), { what: 'shared limits again', ms: 3000 });
  t.same(a.states, [true, false, true]);
});

t.test("failure 'closed': UNAVAILABLE while Redis is down", async (t) => {
  const c = instance(t, { failure: 'closed' });
  await c.limiter.ready();
  t.same(await c.limiter.take('ep:c', 10), { ok: true });
  await server.stop();
  t.same(await c.limiter.take('ep:c', 10), UNAVAILABLE);
  t.same(await c.limiter.take('ep:c', 10, 11), { ok: false, retryAfterMs: Infinity }, 'too large for the plan either way');
  t.throws(() => c.limiter.take('ep:c', 10, -1), RangeError);
  await server.start();
  await waitFor(() => c.limiter.redisUp(), { what: 'shared limits again', ms: 5000 });
  t.same(await c.limiter.take('ep:c', 10), { ok: true });
  t.same(c.states, [true, false, true]);
});

t.test('no Redis at start: local limits at once, and told so', async (t) => {
  const d = instance(t, { url: `redis://127.0.0.1:${await freePort()}/0` });
  await d.limiter.ready();
  t.same(d.states, [false]);
  t.match(d.causes[0]?.message, /ECONNREFUSED/, 'with the cause');
  t.equal(d.limiter.instances(), 1, 'alone as far as it knows');
  t.equal(await admitted(d.limiter, 'ep:d', 10, 12), 10, 'the whole limit, locally');
});

t.test('options are checked', async (t) => {
  t.throws(() => createFleetLimiter({ url: server.url, failure: 'shut' as 'closed' }), /failure must be/);
  t.throws(() => createFleetLimiter({ url: server.url, heartbeatMs: 0 }), /heartbeatMs/);
  t.throws(() => createFleetLimiter({ url: server.url, commandTimeoutMs: 1.5 }), /commandTimeoutMs/);
});
