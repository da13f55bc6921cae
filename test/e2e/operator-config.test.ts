/**
 * What a new operator meets running the built CLI as the README says, from a folder that is not the
 * config's: a relative storage.path, a database only serve makes, and secrets only the daemon needs.
 */
import t, { type Test } from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../support/wait-for.js';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
if (!existsSync(main)) throw new Error('dist/main.js is missing: run `npm run build` first (npm test does)');

/** /etc/chaingate and a home folder, side by side; the config as shipped, its upstream behind a token. */
function layout(t: Test): { etc: string; home: string; db: string } {
  const root = mkdtempSync(join(tmpdir(), 'chaingate-operator-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const etc = join(root, 'etc');
  const home = join(root, 'home');
  mkdirSync(etc);
  mkdirSync(home);
  writeFileSync(
    join(etc, 'config.yaml'),
    [
      'server: { port: 0 }',
      'metrics: { port: 0 }',
      'storage:',
      '  path: ./data/chaingate.db',
      'chains:',
      '  devnet:',
      '    chain_id: 31337',
      '    upstreams:',
      '      - url: http://127.0.0.1:1',
      `        headers: { authorization: "Bearer \${NODE_TOKEN}" }`,
      '',
    ].join('\n'),
  );
  // As /etc/chaingate/env is written for the unit's EnvironmentFile.
  writeFileSync(join(etc, 'env'), '# node credentials\nNODE_TOKEN="s3cret token"\n\n; another comment\nOTHER=1\n');
  return { etc, home, db: join(etc, 'data', 'chaingate.db') };
}

/** The process environment without NODE_TOKEN: an operator's shell, which has none of the daemon's secrets. */
function shellEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_TOKEN;
  return env;
}

function cli(cwd: string, ...args: string[]) {
  return spawnSync(process.execPath, [main, ...args], { cwd, env: shellEnv(), encoding: 'utf8', timeout: 20_000 });
}

t.test('a relative storage.path is the config folder’s; only serve makes the database; owner commands need no daemon secret', async (t) => {
  const { etc, home, db } = layout(t);
  const config = join('..', 'etc', 'config.yaml');

  const list = cli(home, 'owner', 'list', '--config', config);
  t.equal(list.status, 1, 'owner list refuses a missing database');
  t.equal(
    list.stderr,
    `chaingate: no database at ${db}: chaingate serve creates it; check storage.path in the config (a relative path is read from the config file's folder)\n`,
  );
  const backup = cli(home, 'backup', '--out', 'copy.db', '--config', config);
  t.equal(backup.status, 1, 'so does backup');
  t.match(backup.stderr, `no database at ${db}`);
  t.same(readdirSync(home), [], 'nothing made in the folder the commands ran from');
  t.notOk(existsSync(join(etc, 'data')), 'nor next to the config');

  const unset = cli(home, 'check-config', '--config', config);
  t.equal(unset.status, 1, 'check-config needs what serve needs');
  t.match(unset.stderr, 'chains.devnet.upstreams[0].headers.authorization: environment variable NODE_TOKEN is not set');
  const checked = cli(home, 'check-config', '--config', config, '--env-file', join(etc, 'env'));
  t.equal(checked.status, 0, checked.stderr);
  t.equal(
    checked.stdout,
    `${config}: valid (1 chain)\n  storage.path: ${db} does not exist yet: chaingate serve creates it\n`,
    'with the env file; a database still to make is said, not refused',
  );

  const serve = spawn(process.execPath, [main, 'serve', '--config', config, '--env-file', join(etc, 'env')], {
    cwd: home,
    env: shellEnv(),
    stdio: 'ignore',
  });
  t.teardown(() => {
    serve.kill('SIGKILL');
  });
  await waitFor(() => existsSync(db), { what: `serve makes the database next to the config (${db})`, ms: 15_000 });
  serve.kill('SIGTERM');
  await new Promise((r) => serve.once('exit', r));

  const created = cli(home, 'owner', 'create', '--name', 'acme', '--plan', 'free', '--ru', '100', '--config', config);
  t.equal(created.status, 0, created.stderr);
  const listed = cli(home, 'owner', 'list', '--config', config);
  t.equal(listed.status, 0, listed.stderr);
  t.match(listed.stdout, /\n1\s+acme\s+free\s+100\s/, "the daemon's owners, without NODE_TOKEN set");
  t.same(readdirSync(home), [], 'still nothing in the folder the commands ran from');
});

t.test('--env-file: a line that is not KEY=VALUE is refused, naming the file and line', async (t) => {
  const { etc, home } = layout(t);
  writeFileSync(join(etc, 'bad.env'), 'NODE_TOKEN=x\nexport\n');
  const r = cli(home, 'check-config', '--config', join(etc, 'config.yaml'), '--env-file', join(etc, 'bad.env'));
  t.equal(r.status, 1);
  t.equal(r.stderr, `${join(etc, 'bad.env')}: invalid env file:\n  ${join(etc, 'bad.env')}:2: not KEY=VALUE\n`);
  // Node 20 itself looks for the file after any --env-file, even among the script's own arguments:
  // a missing one is refused by Node (exit 9, "node: FILE: not found") before chaingate runs, or by chaingate.
  const missing = cli(home, 'owner', 'list', '--config', join(etc, 'config.yaml'), '--env-file', join(etc, 'absent'));
  t.not(missing.status, 0, 'a missing env file is refused');
  t.match(missing.stderr, join(etc, 'absent'), 'naming it');
});
