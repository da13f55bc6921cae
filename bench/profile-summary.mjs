// Where a V8 CPU profile's time went: self time per function, grouped by the source file it is in
// (dist/x.js read as src/x.ts), the files with the most self time first.
//
//   node bench/profile-summary.mjs <file.cpuprofile | dir>... [--top N] [--functions N] [--after S] [--last S]
//
// A profile covers its thread's whole life, start-up (module compilation, config, SQLite) included:
// `--after S` counts only the samples from S seconds after each profile's start, the load's; `--last S`
// only those of each profile's last S seconds (a run measured after a long warm-up, then stopped).
//
// Several profiles (a directory's, or the main thread's and each worker's of one run: node writes one
// file per thread) are summed, each sample weighted by its own time. Percentages are of the profiles'
// time without `(idle)`; `(program)` (native code V8 cannot attribute: uWS, libuv, the kernel's sends)
// and `(garbage collector)` are shown as files of their own.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)));

/** `args` → `{ files, top, functions }`; throws on an unknown flag or a missing value. */
function parseArgs(args) {
  const opts = { paths: [], top: 30, functions: 8, after: 0, last: 0 };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--top' || a === '--functions' || a === '--after' || a === '--last') {
      const n = Number(args[++i]);
      if (!(n >= 0) || ((a === '--top' || a === '--functions') && (!Number.isInteger(n) || n < 1)))
        throw new Error(`${a} needs a number (whole, above 0, for --top and --functions)`);
      opts[a.slice(2)] = n;
    } else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else opts.paths.push(a);
  }
  if (!opts.paths.length)
    throw new Error('usage: node bench/profile-summary.mjs <file.cpuprofile | dir>... [--top N] [--functions N] [--after S] [--last S]');
  const files = opts.paths.flatMap((p) =>
    statSync(p).isDirectory()
      ? readdirSync(p)
          .filter((f) => f.endsWith('.cpuprofile'))
          .sort()
          .map((f) => join(p, f))
      : [p],
  );
  if (!files.length) throw new Error(`no .cpuprofile in ${opts.paths.join(', ')}`);
  return { files, top: opts.top, functions: opts.functions, afterUs: opts.after * 1e6, lastUs: opts.last * 1e6 };
}

/** The group a frame's url belongs to: src/… for the build, a package for node_modules, node's own modules. */
export function fileOf(url, functionName) {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  let path = url.startsWith('file://') ? fileURLToPath(url) : url;
  if (path.startsWith('node:')) return path;
  const nm = path.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = path.slice(nm + 14).split('/');
    return `node_modules/${parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]}`;
  }
  path = relative(REPO, path);
  // A BENCH_BASELINE build lives under the run's temporary folder: its dist/ still names the same src/.
  const dist = path.lastIndexOf('dist/');
  if (dist >= 0) return `src/${path.slice(dist + 5).replace(/\.js$/, '.ts')}`;
  return path;
}

/**
 * Self µs per function of one profile from `afterUs` after its start (and, when `lastUs` > 0, only in its
 * last `lastUs`), added to `into` (a Map of file → Map
 * of function → µs). A sample's time is the gap to the next sample, as Chrome's DevTools count it; the last
 * sample gets the gap to the end.
 */
export function addProfile(profile, into, afterUs = 0, lastUs = 0) {
  if (lastUs > 0) afterUs = Math.max(afterUs, profile.endTime - profile.startTime - lastUs);
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const { samples = [], timeDeltas = [] } = profile;
  let idleUs = 0;
  let t = profile.startTime;
  const stamps = timeDeltas.map((d) => (t += d));
  for (let i = 0; i < samples.length; i++) {
    const us = (i + 1 < stamps.length ? stamps[i + 1] : profile.endTime) - stamps[i];
    if (!(us > 0) || stamps[i] - profile.startTime < afterUs) continue;
    const { callFrame } = nodes.get(samples[i]);
    const name = callFrame.functionName || '(anonymous)';
    if (name === '(idle)') {
      idleUs += us;
      continue;
    }
    const file = fileOf(callFrame.url, name);
    const fn = callFrame.url ? `${name}:${callFrame.lineNumber + 1}` : name;
    let fns = into.get(file);
    if (!fns) into.set(file, (fns = new Map()));
    fns.set(fn, (fns.get(fn) ?? 0) + us);
  }
  return { idleUs, spanUs: Math.max(0, profile.endTime - profile.startTime - afterUs) };
}

function main() {
  const { files, top, functions, afterUs, lastUs } = parseArgs(process.argv.slice(2));
  const byFile = new Map();
  let idleUs = 0;
  let spanUs = 0;
  for (const f of files) {
    const r = addProfile(JSON.parse(readFileSync(f, 'utf8')), byFile, afterUs, lastUs);
    idleUs += r.idleUs;
    spanUs += r.spanUs;
  }
  const groups = [...byFile].map(([file, fns]) => ({
    file,
    us: [...fns.values()].reduce((a, b) => a + b, 0),
    fns: [...fns].sort((a, b) => b[1] - a[1]),
  }));
  groups.sort((a, b) => b.us - a.us);
  const busyUs = groups.reduce((a, g) => a + g.us, 0);
  const ms = (us) => (us / 1000).toFixed(1).padStart(9);
  const pct = (us) => `${((100 * us) / busyUs).toFixed(1).padStart(5)} %`;
  const out = [
    `${files.length} profile(s): ${files.map((f) => relative(process.cwd(), f)).join(', ')}`,
    `span ${(spanUs / 1000).toFixed(0)} ms, idle ${(idleUs / 1000).toFixed(0)} ms, profiled (not idle) ${(busyUs / 1000).toFixed(0)} ms = 100 %`,
    '',
    `self ms      share  file / function (top ${top} files, up to ${functions} functions each)`,
  ];
  for (const g of groups.slice(0, top)) {
    out.push(`${ms(g.us)}  ${pct(g.us)}  ${g.file}`);
    for (const [fn, us] of g.fns.slice(0, functions)) out.push(`${ms(us)}  ${pct(us)}      ${fn}`);
  }
  const rest = groups.slice(top).reduce((a, g) => a + g.us, 0);
  if (rest > 0) out.push(`${ms(rest)}  ${pct(rest)}  (${groups.length - top} other files)`);
  process.stdout.write(`${out.join('\n')}\n`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    main();
  } catch (err) {
    process.stderr.write(`profile-summary: ${err.message}\n`);
    process.exitCode = 2;
  }
}
