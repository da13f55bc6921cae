/**
 * Installed in one step (issue 34): `npm pack` of a clean copy of the repository gives one tarball that
 * `npm install -g` makes into a working `chaingate` command of at most 100 MB, and `npm run package:deb`
 * makes that installed tree into a Debian package. Both are built once, here, from the files git knows
 * (committed or not), with the repository's node_modules linked in for the build; both run against a
 * real anvil. npm reaches the registry for the dependencies left outside the bundle.
 */
import t, { type Test } from 'tap';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { startDaemon } from '../support/daemon.js';
import { anvilFor, evmChain } from '../support/gateway.js';

// Packing builds the daemon and npm may compile better-sqlite3 where no prebuilt binary downloads.
t.setTimeout(15 * 60_000);

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const LIMIT_BYTES = 100 * 1024 * 1024;
const work = mkdtempSync(join(tmpdir(), 'chaingate-package-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

function sh(cmd: string, args: string[], cwd = work): string {
  return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
}

/** The repository as a clean clone has it (plus what git would add), node_modules linked, not copied. */
function cleanCopy(): string {
  const copy = join(work, 'repo');
  const listed = sh('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], ROOT).split('\0');
  for (const file of listed.filter((f) => f !== '' && existsSync(join(ROOT, f)))) {
    mkdirSync(dirname(join(copy, file)), { recursive: true });
    copyFileSync(join(ROOT, file), join(copy, file));
  }
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  return copy;
}

function bytesUnder(dir: string): number {
  let sum = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) sum += statSync(join(e.parentPath, e.name)).size;
  }
  return sum;
}

const repo = cleanCopy();
const manifestBefore = readFileSync(join(repo, 'package.json'), 'utf8');
sh('npm', ['pack', '--pack-destination', work], repo);
const tarball = join(work, readdirSync(work).find((f) => f.endsWith('.tgz')) ?? 'none.tgz');
const prefix = join(work, 'prefix');
const prebuilt = await prebuiltSqliteHost();
try {
  await promisify(execFile)('npm', ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', tarball], {
    cwd: work,
    env: { ...process.env, npm_config_better_sqlite3_binary_host: prebuilt.url },
    maxBuffer: 64 << 20,
  });
} finally {
  prebuilt.server.close();
}
const installed = join(prefix, 'lib', 'node_modules', 'chaingate');

/**
 * better-sqlite3 installs by downloading its prebuilt addon from GitHub, or, where that fails, compiling
 * SQLite (minutes on a busy machine, and 20 MB of build files left behind). This stands in for GitHub as
 * its binary host (npm_config_better_sqlite3_binary_host, which its prebuild-install reads), serving the
 * addon of the repository's own better-sqlite3 when npm asks for that same version, so the install is
 * what a host that reaches GitHub gets. Any other version is a 404: npm compiles it, as it would anyway.
 */
async function prebuiltSqliteHost(): Promise<{ url: string; server: Server; served: () => number }> {
  const dev = join(ROOT, 'node_modules', 'better-sqlite3');
  const { version } = JSON.parse(readFileSync(join(dev, 'package.json'), 'utf8')) as { version: string };
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const staged = join(work, 'prebuilt');
  mkdirSync(join(staged, 'build', 'Release'), { recursive: true });
  copyFileSync(join(dev, 'build', 'Release', 'better_sqlite3.node'), join(staged, 'build', 'Release', 'better_sqlite3.node'));
  const archive = join(work, name);
  sh('tar', ['czf', archive, '-C', staged, 'build']);
  let served = 0;
  const server = createServer((req, res) => {
    if (req.url !== `/v${version}/${name}`) {
      res.writeHead(404).end();
      return;
    }
    served++;
    res.writeHead(200, { 'content-type': 'application/gzip' }).end(readFileSync(archive));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, served: () => served };
}

/** A config over `anvil` with the database in `dir`, metrics on a free port. */
function configIn(dir: string, upstream: string): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'config.yaml');
  const config = {
    server: { host: '127.0.0.1', port: 0 },
    storage: { path: join(dir, 'chaingate.db') },
    chains: { devnet: evmChain([upstream]) },
    metrics: { port: 0 },
  };
  writeFileSync(file, stringify(config));
  return file;
}

/** check-config with `bin`, then serve: ready, and eth_blockNumber on the keyless path answered by anvil. */
async function serves(t: Test, bin: string, dir: string): Promise<void> {
  const anvil = await anvilFor(t);
  const config = configIn(dir, anvil.url);
  const checked = spawnSync(bin, ['check-config', '--config', config], { encoding: 'utf8' });
  t.equal(checked.status, 0, `check-config: ${checked.stdout}${checked.stderr}`);
  t.match(checked.stdout, /valid/);
  const daemon = await startDaemon(t, config, { bin });
  const base = `http://127.0.0.1:${daemon.port}`;
  const ready = await fetch(`${base}/readyz`);
  t.equal(ready.status, 200, 'ready: the chain has its node in rotation');
  const answer = await fetch(`${base}/devnet/v1/rpc/public`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }),
  });
  t.equal(answer.status, 200, daemon.log());
  t.match(await answer.json(), { jsonrpc: '2.0', id: 1, result: /^0x[0-9a-f]+$/ });
}

t.test('npm pack: one tarball, the repository left as it was', async (t) => {
  t.ok(existsSync(tarball), tarball);
  t.equal(readFileSync(join(repo, 'package.json'), 'utf8'), manifestBefore, "postpack put the repository's package.json back");
  const files = sh('tar', ['tzf', tarball])
    .split('\n')
    .filter((f) => f !== '');
  for (const f of [
    'dist/bundle/main.js',
    'dist/bundle/server/worker-thread.js',
    'dist/dashboard/index.html',
    'systemd/chaingate.service',
    'config.example.yaml',
    'docs/operations.md',
    'dist/vendor/uws/build.json',
  ]) {
    t.ok(files.includes(`package/${f}`), f);
  }
  t.equal(files.filter((f) => f.endsWith('.node')).length, 1, 'one uWS binary');
  t.same(
    files.filter((f) => /^package\/(src|test|bench|node_modules|systemd\/package)\//.test(f)),
    [],
    'no sources, tests or packaging scripts',
  );
  const pkg = JSON.parse(sh('tar', ['xzfO', tarball, 'package/package.json']));
  t.same(Object.keys(pkg.dependencies).sort(), ['better-sqlite3', 'ioredis', 'pg', 'pino', 'prom-client', 'ws']);
  t.equal(pkg.devDependencies, undefined);
  t.equal(pkg.optionalDependencies, undefined, 'no anvil, no second uWS');
});

t.test('npm install -g: a chaingate command of at most 100 MB, without anvil or the uWS packages', async (t) => {
  const bin = join(prefix, 'bin', 'chaingate');
  t.ok(existsSync(bin), bin);
  const size = bytesUnder(prefix);
  t.comment(prebuilt.served() > 0 ? 'better-sqlite3: its prebuilt addon' : 'better-sqlite3: compiled by npm');
  t.comment(
    `installed: ${(size / 1024 / 1024).toFixed(1)} MB, node_modules ${(bytesUnder(join(installed, 'node_modules')) / 1024 / 1024).toFixed(1)} MB`,
  );
  t.ok(size <= LIMIT_BYTES, `${size} bytes <= 100 MB`);
  const modules = readdirSync(join(installed, 'node_modules'));
  for (const absent of ['@foundry-rs', '@trufflesuite', '@btc-vision', 'ethers', 'tap', 'typescript'])
    t.notOk(modules.includes(absent), `no ${absent}`);
  await serves(t, bin, join(work, 'npm-run'));
});

t.test('npm run package:deb: the Debian package, checked and run', async (t) => {
  sh('node', ['systemd/package/deb.mjs', '--installed', installed, '--out', work], repo);
  const deb = join(work, readdirSync(work).find((f) => f.endsWith('.deb')) ?? 'none.deb');
  const info = sh('dpkg-deb', ['--info', deb]);
  t.match(info, /Package: chaingate\n/);
  t.match(info, new RegExp(`Depends: nodejs \\(>= ${process.versions.node.split('.')[0]}\\)`));
  for (const script of ['postinst', 'prerm', 'postrm', 'md5sums']) t.match(info, new RegExp(`\\b${script}\\b`), script);
  const contents = sh('dpkg-deb', ['--contents', deb]);
  for (const path of [
    './opt/chaingate/dist/bundle/main.js',
    './lib/systemd/system/chaingate.service',
    './usr/share/chaingate/config.yaml',
    './opt/chaingate/docs/operations.md',
  ]) {
    t.match(contents, ` ${path}\n`, path);
  }
  t.match(contents, /root\/root .* \.\/usr\/bin\/chaingate -> \/opt\/chaingate\/dist\/bundle\/main\.js\n/);
  t.notMatch(contents, /better-sqlite3\/(deps|src)\//, 'no C sources');

  const scripts = join(work, 'control');
  sh('dpkg-deb', ['--control', deb, scripts]);
  const postinst = readFileSync(join(scripts, 'postinst'), 'utf8');
  t.match(postinst, /adduser --system --group --home \/var\/lib\/chaingate/);
  t.match(postinst, /install -d -o chaingate -g chaingate -m 0750 \/var\/lib\/chaingate/);
  t.match(postinst, /if \[ ! -e \/etc\/chaingate\/config\.yaml \]; then/, 'a config already there is kept');

  const tree = join(work, 'extracted');
  sh('dpkg-deb', ['-x', deb, tree]);
  t.equal(readlinkSync(join(tree, 'usr', 'bin', 'chaingate')), '/opt/chaingate/dist/bundle/main.js');
  t.match(
    readFileSync(join(tree, 'usr', 'share', 'chaingate', 'config.yaml'), 'utf8'),
    /^ {2}path: \/var\/lib\/chaingate\/chaingate\.db$/m,
  );
  const unit = readFileSync(join(tree, 'lib', 'systemd', 'system', 'chaingate.service'), 'utf8');
  const docs = /^Documentation=(.*)$/m.exec(unit)?.[1]?.split(' ') ?? [];
  t.ok(docs.length > 0, 'Documentation= is set');
  for (const uri of docs) {
    t.match(uri, /^file:\/\/\/opt\/chaingate\//, uri);
    t.ok(existsSync(join(tree, uri.slice('file://'.length))), `${uri} is in the package`);
  }
  t.match(unit, /^ExecStart=chaingate serve /m, 'the unit finds chaingate, and it node, on the service PATH');

  // test/setup/servers.ts installs lintian; without that setup (or root), the check is skipped, saying so.
  const lintian = spawnSync('sh', ['-c', 'command -v lintian'], { stdio: 'ignore' }).status === 0;
  t.test('lintian', { skip: lintian ? false : 'lintian is not on the PATH (test/setup/servers.ts installs it)' }, async (t) => {
    const r = spawnSync('lintian', ['--no-tag-display-limit', deb], { encoding: 'utf8' });
    t.comment(r.stdout.trim() || 'lintian: no tags');
    t.equal(r.status, 0, 'no errors');
    t.notMatch(r.stdout, /^E: /m);
  });

  // The extracted tree run in place, as /opt/chaingate runs: node on its entry, which finds its parts.
  const main = join(tree, 'opt', 'chaingate', 'dist', 'bundle', 'main.js');
  await serves(t, main, join(work, 'deb-run'));
});
