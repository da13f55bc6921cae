/**
 * `npm run package:deb [-- --out DIR] [-- --installed DIR]`: builds chaingate_VERSION_ARCH.deb with
 * dpkg-deb, in the working directory or DIR. The tree under /opt/chaingate is what `npm install -g` makes
 * of `npm pack`'s tarball (the bundle, the one uWS binary, the dependencies outside the bundle), so the
 * package and the tarball hold the same files; --installed takes such a tree already made (the tests).
 *
 *   /opt/chaingate/                     the installed package, docs/ and config.example.yaml included
 *   /usr/bin/chaingate                  → /opt/chaingate/dist/bundle/main.js
 *   /lib/systemd/system/chaingate.service
 *   /usr/share/chaingate/config.yaml    the first /etc/chaingate/config.yaml (postinst copies it)
 *   /usr/share/doc/chaingate/           copyright, changelog
 *
 * The maintainer scripts (debian/) make the chaingate user, /var/lib/chaingate and the config.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ROOT, run } from './manifest.mjs';

const HERE = join(ROOT, 'systemd', 'package');
const DB_PATH = '/var/lib/chaingate/chaingate.db';
/** Debian's usual variables name who builds the package; lintian wants a mail address with a real domain. */
const MAINTAINER = `${process.env.DEBFULLNAME ?? 'chaingate maintainers'} <${process.env.DEBEMAIL ?? 'maintainers@chaingate.example.org'}>`;

function option(name) {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
}

/** `npm pack` (its prepack builds, bundles and vendors uWS), then `npm install -g` of the tarball into `work`. */
function packAndInstall(work) {
  run('npm', ['pack', '--pack-destination', work], { cwd: ROOT });
  const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
  if (tarball === undefined) throw new Error(`npm pack wrote no tarball to ${work}`);
  const prefix = join(work, 'prefix');
  run('npm', ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', join(work, tarball)]);
  return join(prefix, 'lib', 'node_modules', 'chaingate');
}

/** Folders of a dependency that a run never reads. */
const UNREAD_DIRS = new Set(['.github', 'docs', 'test', 'tests', 'benchmarks', 'example', 'examples']);
/** Files of a dependency that a run never reads: dotfiles, docs, maps, type declarations. Licences stay. */
const unreadFile = (name) => /^\./.test(name) || (/\.(md|markdown|html|map|d\.ts)$/i.test(name) && !/^(licen[cs]e|copying)/i.test(name));

/**
 * What a run never reads: better-sqlite3's C sources and, when npm compiled it here for want of a
 * prebuilt binary, the compiler's intermediate files (some 25 MB); the dependencies' docs and tests. The
 * native addons lose their symbols (strip), as Debian's are.
 */
function prune(opt) {
  const modules = join(opt, 'node_modules');
  const sqlite = join(modules, 'better-sqlite3');
  for (const dir of ['deps', 'src']) rmSync(join(sqlite, dir), { recursive: true, force: true });
  const addon = join(sqlite, 'build', 'Release', 'better_sqlite3.node');
  const kept = readFileSync(addon);
  rmSync(join(sqlite, 'build'), { recursive: true, force: true });
  mkdirSync(join(sqlite, 'build', 'Release'), { recursive: true });
  writeFileSync(addon, kept);
  rmSync(join(modules, '.bin'), { recursive: true, force: true });
  for (const e of readdirSync(modules, { withFileTypes: true, recursive: true })) {
    const path = join(e.parentPath, e.name);
    if (!existsSync(path)) continue;
    if (e.isDirectory() && UNREAD_DIRS.has(e.name)) rmSync(path, { recursive: true, force: true });
    else if (e.isFile() && unreadFile(e.name)) rmSync(path);
  }
  for (const f of files(opt).filter((f) => f.endsWith('.node'))) run('strip', ['--strip-unneeded', f]);
}

/** The example config with the database where the unit keeps state; refuses an example that moved it. */
function serviceConfig() {
  const example = readFileSync(join(ROOT, 'config.example.yaml'), 'utf8');
  const config = example.replace(/^( {2}path: )\.\/data\/chaingate\.db$/m, `$1${DB_PATH}`);
  if (config === example) throw new Error('config.example.yaml: storage.path ./data/chaingate.db not found to point at /var/lib/chaingate');
  return config;
}

function files(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

function isProgram(file) {
  if (file.endsWith('.node')) return false;
  const head = Buffer.alloc(4);
  const fd = openSync(file, 'r');
  readSync(fd, head, 0, 4, 0);
  closeSync(fd);
  return head.subarray(0, 2).toString() === '#!' || head.toString('latin1') === '\x7fELF';
}

function control(root, version, arch) {
  const major = Number(process.versions.node.split('.')[0]);
  // The addons were built (or chosen) against this host's C library: no older one is promised.
  // dpkg-query's own ${Version} field, not a template placeholder.
  const libc = execFileSync('dpkg-query', ['-W', `-f=\${Version}`, 'libc6'], { encoding: 'utf8' }).split('-')[0];
  const kib = Math.ceil(files(root).reduce((sum, f) => sum + statSync(f).size, 0) / 1024);
  return [
    'Package: chaingate',
    `Version: ${version}`,
    `Architecture: ${arch}`,
    `Maintainer: ${MAINTAINER}`,
    `Installed-Size: ${kib}`,
    // The uWS binary inside is built for one Node major (its ABI): nodejs from NodeSource or Debian.
    `Depends: nodejs (>= ${major}), nodejs (<< ${major + 1}), libc6 (>= ${libc}), adduser`,
    'Section: net',
    'Priority: optional',
    'Description: gateway in front of Ethereum execution and consensus nodes',
    ' chaingate serves JSON-RPC over HTTP and WebSocket and the Beacon API to',
    ' clients holding API keys, with metering, rate limits and failover between',
    ' nodes. It runs as the chaingate user under systemd.',
    '',
  ].join('\n');
}

function docFiles(root, version) {
  const doc = join(root, 'usr', 'share', 'doc', 'chaingate');
  mkdirSync(doc, { recursive: true });
  writeFileSync(
    join(doc, 'copyright'),
    [
      'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/',
      'Upstream-Name: chaingate',
      '',
      'Files: *',
      `Copyright: ${new Date().getUTCFullYear()} chaingate maintainers`,
      'License: MIT',
      '',
    ].join('\n'),
  );
  const date = new Date().toUTCString().replace('GMT', '+0000');
  const log = `chaingate (${version}) unstable; urgency=medium\n\n  * Built with npm run package:deb.\n\n -- ${MAINTAINER}  ${date}\n`;
  writeFileSync(join(doc, 'changelog.gz'), gzipSync(log, { level: 9 }));
  const overrides = join(root, 'usr', 'share', 'lintian', 'overrides');
  mkdirSync(overrides, { recursive: true });
  copyFileSync(join(HERE, 'debian', 'lintian-overrides'), join(overrides, 'chaingate'));
}

/** Lays out the package's tree in `root` from the installed package `installed`. */
function layout(root, installed) {
  const opt = join(root, 'opt', 'chaingate');
  cpSync(installed, opt, { recursive: true, verbatimSymlinks: true });
  prune(opt);
  mkdirSync(join(root, 'usr', 'bin'), { recursive: true });
  symlinkSync('/opt/chaingate/dist/bundle/main.js', join(root, 'usr', 'bin', 'chaingate'));
  mkdirSync(join(root, 'lib', 'systemd', 'system'), { recursive: true });
  copyFileSync(join(ROOT, 'systemd', 'chaingate.service'), join(root, 'lib', 'systemd', 'system', 'chaingate.service'));
  mkdirSync(join(root, 'usr', 'share', 'chaingate'), { recursive: true });
  writeFileSync(join(root, 'usr', 'share', 'chaingate', 'config.yaml'), serviceConfig());
  // Files readable by all, programs (a script or an ELF executable, not an addon) executable too.
  for (const f of files(root)) chmodSync(f, statSync(f).mode & 0o111 && isProgram(f) ? 0o755 : 0o644);
}

function debianDir(root, version, arch) {
  const debian = join(root, 'DEBIAN');
  mkdirSync(debian);
  for (const script of ['postinst', 'prerm', 'postrm']) {
    copyFileSync(join(HERE, 'debian', script), join(debian, script));
    chmodSync(join(debian, script), 0o755);
  }
  const sums = files(root)
    .filter((f) => !f.startsWith(debian))
    .map((f) => `${createHash('md5').update(readFileSync(f)).digest('hex')}  ${relative(root, f)}`);
  writeFileSync(join(debian, 'md5sums'), `${sums.join('\n')}\n`);
  writeFileSync(join(debian, 'control'), control(root, version, arch));
}

const out = resolve(option('out') ?? process.cwd());
const work = mkdtempSync(join(tmpdir(), 'chaingate-deb-'));
try {
  const installed = option('installed') !== undefined ? resolve(option('installed')) : packAndInstall(work);
  const { version } = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
  const arch = execFileSync('dpkg', ['--print-architecture'], { encoding: 'utf8' }).trim();
  const root = join(work, 'root');
  layout(root, installed);
  docFiles(root, version);
  debianDir(root, version, arch);
  const deb = join(out, `chaingate_${version}_${arch}.deb`);
  run('dpkg-deb', ['--root-owner-group', '-Zxz', '--build', root, deb]);
  process.stdout.write(`${deb}\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
