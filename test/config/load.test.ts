import t, { type Test } from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfigFile, loadStoreConfigFile } from '../../src/config/load.js';

const CHAIN = `chains:
  devnet:
    chain_id: 1
    upstreams:
      - url: http://127.0.0.1:1
        headers: { authorization: "Bearer \${NODE_TOKEN}" }
`;

/** A config file in a folder of its own, and the folder (removed at teardown). */
function configFile(t: Test, text: string): { file: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-load-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'etc'));
  const file = join(dir, 'etc', 'config.yaml');
  writeFileSync(file, text);
  return { file, dir };
}

const env = { NODE_TOKEN: 'x' };

t.test("a relative storage.path, the default's too, is read from the config file's folder, not the current one", async (t) => {
  const cases: Array<[string, (dir: string) => string]> = [
    ['storage: { path: ./data/chaingate.db }\n', (dir) => join(dir, 'etc', 'data', 'chaingate.db')],
    ['storage: { path: ../var/gw.db }\n', (dir) => join(dir, 'var', 'gw.db')],
    ['', (dir) => join(dir, 'etc', 'data', 'chaingate.db')],
    ['storage: { path: /srv/chaingate/gw.db }\n', () => '/srv/chaingate/gw.db'],
  ];
  for (const [storage, expected] of cases) {
    const { file, dir } = configFile(t, `${storage}${CHAIN}`);
    const whole = loadConfigFile(file, env);
    const store = loadStoreConfigFile(file, env);
    t.equal(whole.ok && whole.config.storage.path, expected(dir), `${storage.trim() || '(default)'}: serve, check-config`);
    t.equal(store.ok && store.config.storage.path, expected(dir), `${storage.trim() || '(default)'}: operator commands`);
  }
});

t.test(`the operator commands read storage and plans only: a \${NAME} or a mistake elsewhere is not theirs`, async (t) => {
  const { file } = configFile(t, `storage: { path: ./gw.db }\nplans:\n  gold: { rps: 10 }\nserver: { port: -1 }\n${CHAIN}`);
  t.match(loadConfigFile(file, {}), {
    ok: false,
    errors: [
      'chains.devnet.upstreams[0].headers.authorization: environment variable NODE_TOKEN is not set',
      'server.port: must be an integer from 0 to 65535',
    ],
  });
  const store = loadStoreConfigFile(file, {});
  t.ok(store.ok, 'read without NODE_TOKEN');
  if (!store.ok) return;
  t.same(Object.keys(store.config.plans), ['gold']);
  t.same(Object.keys(store.config.chains), ['devnet'], "the chains' slugs, for endpoint create");
  t.ok(Object.isFrozen(store.config.storage), 'deep-frozen');
});

t.test(`a \${NAME} or a mistake in storage or plans is the operator commands' error`, async (t) => {
  const { file } = configFile(t, `storage: { url: "postgres://gw:\${PGPASSWORD}@db/gw", path: x.db }\nplans: { gold: { rps: 0 } }\n`);
  t.same(loadStoreConfigFile(file, {}), {
    ok: false,
    errors: [
      'storage.url: environment variable PGPASSWORD is not set',
      'storage: set path (SQLite, one machine) or url (PostgreSQL, a fleet of instances), not both',
      'plans.gold.rps: must be an integer from 1 to 1000000000',
    ],
  });
  const { file: fleet } = configFile(t, `storage: { url: "postgres://gw:\${PGPASSWORD}@db/gw" }\n`);
  const read = loadStoreConfigFile(fleet, { PGPASSWORD: 'pw' });
  t.equal(read.ok && read.config.storage.url, 'postgres://gw:pw@db/gw', 'a fleet store needs no cluster section for them');
  t.match(loadStoreConfigFile(join(tmpdir(), 'chaingate-absent.yaml')), { ok: false, errors: [/cannot read the config file \(ENOENT\)/] });
});
