/**
 * `npm pack`'s prepack: builds dist (the daemon, the dashboard, the config schema), bundles the daemon
 * with its pure-JavaScript dependencies (bundle.mjs), copies the one uWS binary that loads on this host into dist/vendor/uws/, and swaps in the installed package.json
 * (manifest.mjs); postpack.mjs puts the repository's back. The tarball then installs with `npm install -g`
 * and holds one uWS build, for this platform and this Node major, instead of two packages of every build.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { bundle } from './bundle.mjs';
import { ROOT, restoreManifest, run, swapInInstalledManifest } from './manifest.mjs';

/** The same order as src/server/uws.ts's UWS_BUILDS: the newer build first. */
const BUILDS = ['@btc-vision/uwebsockets.js', '@trufflesuite/uws-js-unofficial'];
const VENDOR = join(ROOT, 'dist', 'vendor', 'uws');
const require = createRequire(join(ROOT, 'package.json'));

/** The package's folder: the nearest one above its main file that holds its package.json. */
function packageDir(name) {
  let dir = dirname(require.resolve(name));
  while (!existsSync(join(dir, 'package.json')) || JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).name !== name) {
    if (dirname(dir) === dir) throw new Error(`${name}: package.json not found`);
    dir = dirname(dir);
  }
  return dir;
}

/** `file` inside `dir` or one level down (trufflesuite keeps its binaries in binaries/). */
function findBinary(dir, file) {
  if (existsSync(join(dir, file))) return join(dir, file);
  for (const sub of readdirSync(dir, { withFileTypes: true })) {
    if (sub.isDirectory() && existsSync(join(dir, sub.name, file))) return join(dir, sub.name, file);
  }
  return undefined;
}

/** The first build whose binary for this host loads and is the native addon (App, SSLApp, getParts). */
function hostBuild() {
  const file = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const tried = [];
  for (const name of BUILDS) {
    try {
      const dir = packageDir(name);
      const binary = findBinary(dir, file);
      if (binary === undefined) {
        tried.push(`${name}: no ${file}`);
        continue;
      }
      const mod = require(binary);
      if (typeof mod.App === 'function' && typeof mod.SSLApp === 'function' && typeof mod.getParts === 'function') {
        const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
        return { name, version: pkg.version, license: pkg.license, dir, binary, file };
      }
      tried.push(`${name}: ${file} is not the native addon`);
    } catch (err) {
      tried.push(`${name}: ${String(err.message).split('\n')[0]}`);
    }
  }
  throw new Error(`no uWS build loads on this host, so none can be packed:\n  - ${tried.join('\n  - ')}`);
}

function vendorUws() {
  const build = hostBuild();
  rmSync(VENDOR, { recursive: true, force: true });
  mkdirSync(VENDOR, { recursive: true });
  copyFileSync(build.binary, join(VENDOR, build.file));
  if (existsSync(join(build.dir, 'LICENSE'))) copyFileSync(join(build.dir, 'LICENSE'), join(VENDOR, 'LICENSE'));
  const manifest = { package: build.name, version: build.version, license: build.license, binary: build.file };
  writeFileSync(join(VENDOR, 'build.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  process.stderr.write(`prepack: vendored ${build.name}@${build.version} ${build.file}\n`);
}

// A pack that failed half way left the installed manifest, without scripts, in place.
restoreManifest();
run('npm', ['run', 'build', '--silent'], { cwd: ROOT });
await bundle(ROOT);
vendorUws();
swapInInstalledManifest();
