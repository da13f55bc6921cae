/**
 * The package.json an installed chaingate gets, made from the repository's by `npm pack` (prepack.mjs):
 * only what `chaingate serve` and the operator commands need at run time. npm packs whatever package.json
 * is on disk, so prepack swaps this one in and postpack puts the repository's back (BACKUP holds it).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EXTERNAL } from './bundle.mjs';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Runs `cmd args` (spawnSync `opts`, e.g. `cwd`) for the packaging scripts; throws unless it exits 0. Its output
 * goes to stderr: stdout stays the calling script's own (npm pack prints the tarball's name there).
 */
export function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 2, 2], ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${r.status})`);
}
const MANIFEST = `${ROOT}package.json`;
/** The repository's own package.json while a pack runs; git ignores it and `files` leaves it out. */
const BACKUP = `${ROOT}.package.json.pack-backup`;

/**
 * The installed manifest: the bundle (bundle.mjs) as the command, and as dependencies only the packages
 * left outside it. Out with the rest go both uWS packages (prepack.mjs vendors the one binary that loads
 * here instead of some 230 MB of binaries for every platform) and the optional anvil (43 MB; only
 * `chaingate devnet` and the tests use it). The vendored binary is built for this platform and this Node
 * major (its ABI), so `os`, `cpu` and `engines` say so: npm refuses, or warns, where it cannot load.
 */
export function installedManifest(dev) {
  const pkg = structuredClone(dev);
  for (const key of ['devDependencies', 'optionalDependencies', 'scripts', 'tap', 'overrides']) delete pkg[key];
  pkg.dependencies = Object.fromEntries(EXTERNAL.map((name) => [name, dev.dependencies[name]]));
  pkg.bin = { chaingate: 'dist/bundle/main.js' };
  pkg.files = ['dist/bundle', 'dist/dashboard', 'dist/vendor', ...dev.files.filter((f) => f !== 'dist')];
  const major = process.versions.node.split('.')[0];
  pkg.engines = { node: `${major}.x` };
  pkg.os = [process.platform];
  pkg.cpu = [process.arch];
  return pkg;
}

/** Puts back the repository's package.json after a pack, or after one that failed half way. */
export function restoreManifest() {
  if (existsSync(BACKUP)) renameSync(BACKUP, MANIFEST);
}

/** Writes the installed manifest in place of the repository's, which it keeps in BACKUP. */
export function swapInInstalledManifest() {
  restoreManifest();
  const text = readFileSync(MANIFEST, 'utf8');
  writeFileSync(BACKUP, text);
  writeFileSync(MANIFEST, `${JSON.stringify(installedManifest(JSON.parse(text)), null, 2)}\n`);
}
