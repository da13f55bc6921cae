import t from 'tap';
import { validateConfig } from '../../src/config/schema.js';
import { createConnectionCap } from '../../src/limits/connection-cap.js';
import {
  FDS_PER_WORKER,
  HEADROOM,
  MIN_CONNECTIONS,
  openFiles,
  openFilesLimit,
  resolveMaxConnections,
  SHORT_MARGIN,
  startFdWatch,
} from '../../src/server/fd-watch.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            300                  4096                 files
Max locked memory         8388608              8388608              bytes
`;

t.test('the soft open-files limit is read from /proc/self/limits', async (t) => {
  t.equal(
    openFilesLimit(() => LIMITS),
    300,
  );
  t.equal(
    openFilesLimit(() => LIMITS.replace('300  ', 'unlimited')),
    null,
    'unlimited: no limit',
  );
  t.equal(
    openFilesLimit(() => {
      throw new Error('ENOENT');
    }),
    null,
    'no /proc: no limit',
  );
  const real = openFilesLimit();
  t.ok(real !== null && real > 0, `this process: ${real}`);
  const open = openFiles();
  t.ok(open !== null && open >= 3 && open < real!, `this process holds ${open}`);
});

function config(extra: Record<string, unknown>) {
  const r = validateConfig({
    ...extra,
    chains: {
      a: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }, { url: 'http://127.0.0.1:2', max_connections: 10 }] },
      b: { kind: 'beacon', upstreams: [{ url: 'http://127.0.0.1:3' }] },
    },
    server: { default_chain: 'a', ...(extra.server as object | undefined) },
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.config;
}

t.test('auto: the limit less what the process holds, the upstreams’ sockets, the workers’ and a headroom', async (t) => {
  const upstreams = 64 + 2 + (10 + 2) + (64 + 2);
  const one = resolveMaxConnections(config({}), 10_000, 40, 1);
  t.same(one, { max: 10_000 - (40 + upstreams + HEADROOM), source: 'auto', limit: 10_000, reserve: 40 + upstreams + HEADROOM });
  const two = resolveMaxConnections(config({}), 10_000, 40, 2);
  t.equal(two.reserve, 40 + upstreams + 2 * FDS_PER_WORKER + HEADROOM, 'two workers');
  t.equal(resolveMaxConnections(config({}), 200, 40, 1).max, MIN_CONNECTIONS, 'a limit too low: the floor');
  t.equal(resolveMaxConnections(config({}), null, 40, 1).max, 2 ** 31 - 1, 'no limit known: no cap');
  t.same(resolveMaxConnections(config({ server: { max_connections: 3 } }), 300, 40, 1), {
    max: 3,
    source: 'config',
    limit: 300,
    reserve: null,
  });
});

t.test('the watch: short within the margin, exhausted at the limit, each told once per change', async (t) => {
  const cap = createConnectionCap(1000);
  let open: number | null = 100;
  const told: string[] = [];
  const stop = startFdWatch({
    limit: 300,
    cap,
    count: () => open,
    intervalMs: 10,
    onShort: (short, n) => told.push(`short ${short} ${n}`),
    onExhausted: (exhausted, n) => told.push(`exhausted ${exhausted} ${n}`),
  });
  t.teardown(stop);
  const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 40));
  await tick();
  t.same(told, [], 'far from the limit: nothing');
  open = 300 - SHORT_MARGIN;
  await tick();
  await tick();
  t.same(told, [`short true ${300 - SHORT_MARGIN}`], 'within the margin: once');
  t.equal(cap.refusal(), 'file_descriptors');
  open = Number.POSITIVE_INFINITY; // no descriptor left even to count them
  await tick();
  t.same(told.slice(1), ['exhausted true Infinity']);
  open = null; // unreadable: no change
  await tick();
  open = 250;
  await tick();
  t.same(told.slice(2), ['short false 250', 'exhausted false 250']);
  t.equal(cap.refusal(), null, 'taken again');
});
