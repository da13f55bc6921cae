import t from 'tap';
import { loadConfigText } from '../../src/config/load.js';
import { restartOnlyChanges } from '../../src/config/restart-keys.js';
import type { Config } from '../../src/config/schema.js';

const base = `
server: { port: 8080, default_chain: devnet }
storage: { path: /var/lib/chaingate/chaingate.db }
metrics: { port: 9464, token: a-metrics-token-of-some-length }
chains:
  devnet: { chain_id: 1, upstreams: [{ url: "http://127.0.0.1:8545" }] }
plans:
  free: { rps: 10 }
`;

function config(text: string): Config {
  const r = loadConfigText(text);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.config;
}

t.test('fences.contracts_cover_balance applies on a restart: the grants already compiled keep it', async (t) => {
  t.same(restartOnlyChanges(config(base), config(`${base}fences: { contracts_cover_balance: true }\n`)), [
    'fences.contracts_cover_balance: applies only on a restart (off → on); restart chaingate, or put it back to reload the rest',
  ]);
});

t.test('what a reload applies is not reported; listeners and the store are, each by its key', async (t) => {
  const running = config(base);
  t.same(restartOnlyChanges(running, config(base)), [], 'the same file');
  const applied = base
    .replace('free: { rps: 10 }', 'free: { rps: 20 }\n  gold: { rps: 99 }')
    .replace('chains:', 'chains:\n  other: { chain_id: 2, upstreams: [{ url: "http://127.0.0.1:9545" }] }');
  t.same(restartOnlyChanges(running, config(applied)), [], 'chains and plans apply');
  const moved = base
    .replace('port: 8080', 'port: 9090, host: 0.0.0.0, workers: 3')
    .replace('/var/lib/chaingate/chaingate.db', '/tmp/other.db')
    .replace('port: 9464, token: a-metrics-token-of-some-length', 'port: 9465, token: another-token-of-some-length');
  t.same(restartOnlyChanges(running, config(moved)), [
    'server.host: applies only on a restart (127.0.0.1 → 0.0.0.0); restart chaingate, or put it back to reload the rest',
    'server.port: applies only on a restart (8080 → 9090); restart chaingate, or put it back to reload the rest',
    'server.workers: applies only on a restart (auto → 3); restart chaingate, or put it back to reload the rest',
    'storage.path: applies only on a restart (/var/lib/chaingate/chaingate.db → /tmp/other.db); restart chaingate, or put it back to reload the rest',
    'metrics.port: applies only on a restart (9464 → 9465); restart chaingate, or put it back to reload the rest',
    'metrics.token: applies only on a restart (changed); restart chaingate, or put it back to reload the rest',
  ]);
  const off = restartOnlyChanges(
    running,
    config(`${base}`.replace('metrics: { port: 9464, token: a-metrics-token-of-some-length }', 'metrics: { enabled: false }')),
  );
  t.equal(off[0], 'metrics.enabled: applies only on a restart (on → off); restart chaingate, or put it back to reload the rest');
  t.notOk(off.join('\n').includes('a-metrics-token'), 'the token is never shown');
});

t.test("a fleet's store and cluster need a restart; their URLs, which may hold passwords, are never shown", async (t) => {
  const fleet = (pw: string, ttl: number): Config =>
    config(
      base.replace(
        'storage: { path: /var/lib/chaingate/chaingate.db }',
        `storage: { url: "postgres://gw:${pw}@10.0.0.5/chaingate" }\ncluster: { redis_url: "redis://:${pw}@10.0.0.6/0", instance: gw-1, reservation_ttl_s: ${ttl} }`,
      ),
    );
  const changes = restartOnlyChanges(fleet('old-secret', 10), fleet('new-secret', 20));
  t.same(changes, [
    'storage.url: applies only on a restart (changed); restart chaingate, or put it back to reload the rest',
    'cluster.redis_url: applies only on a restart (changed); restart chaingate, or put it back to reload the rest',
    'cluster.reservation_ttl_s: applies only on a restart (10 → 20); restart chaingate, or put it back to reload the rest',
  ]);
  t.notOk(changes.join('\n').includes('secret'), 'no password shown');
});
