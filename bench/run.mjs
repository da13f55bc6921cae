// chaingate's benchmarks (npm run bench): each section starts its servers, drives them with wrk and
// reports figures measured side by side in one run, since only ratios survive a noisy shared machine.
// Knobs: see bench/README.md.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as authRefusals from './auth-refusals.mjs';
import * as cacheDedup from './cache-dedup.mjs';
import * as consistency from './consistency.mjs';
import * as fences from './fences.mjs';
import * as tracing from './tracing.mjs';
import * as fleet from './fleet.mjs';
import * as forwardCost from './forward-cost.mjs';
import * as httpProxy from './http-proxy.mjs';
import * as wsFanout from './ws-fanout.mjs';
import { knowsWorkers } from './lib/chaingate.mjs';
import { nginxPath, nginxVersion } from './lib/nginx.mjs';
import { canPin, disablePinning, pinSelf, setLogDir, stopAll, stopChildrenOnExit } from './lib/processes.mjs';
import { notRun } from './lib/measure.mjs';
import { markdownHeading, sectionMarkdown, sectionText } from './lib/report.mjs';
import { mergeRounds } from './lib/rounds.mjs';
import { readSettings } from './lib/settings.mjs';
import { hasWrk, writePostScript, wrkVersion } from './lib/wrk.mjs';

/**
 * Sections in the order they run. A new benchmark is one more module exporting `id`, `title`,
 * `run(ctx)` → runs (see lib/measure.mjs) and `checks(runs)` → its targets judged, and `needs`, the
 * tools it cannot run without (`['wrk']`), when it has any.
 */
const SECTIONS = [
  httpProxy,
  forwardCost,
  consistency,
  wsFanout,
  cacheDedup,
  authRefusals,
  fences,
  fleet,
  await import('./many-keys.mjs'),
  tracing,
  await import('./latency-recording.mjs'),
];

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const OUT_DIR = join(BENCH_DIR, 'out');
const REPO_DIR = dirname(BENCH_DIR);

/** A path as printed: relative to the repository when inside it, so a line copied into RESULTS.md names no machine's directories. */
function shownPath(path) {
  const inRepo = relative(dirname(BENCH_DIR), path);
  return inRepo.startsWith('..') || isAbsolute(inRepo) ? path : inRepo;
}

const REQUEST = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const INSTALL_HINT = 'sudo apt-get install wrk nginx';

const log = (msg) => process.stdout.write(`· ${msg}\n`);

function gitCommit(ref = 'HEAD') {
  const r = spawnSync('git', ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], { cwd: BENCH_DIR });
  return r.status === 0 ? r.stdout.toString().trim() : null;
}

/**
 * BENCH_BASELINE's commit, built in `work`: its files from git, this tree's node_modules, its own
 * tsc build. Its rows then run beside this tree's in every round, so a change is judged against the
 * code before it on the same machine in the same minutes. `workers` is the `server.workers` its configs
 * get (null: none). Throws with what failed.
 */
function buildBaseline(ref, work) {
  const commit = gitCommit(ref);
  if (!commit) throw new Error(`BENCH_BASELINE: '${ref}' is not a commit of this repository`);
  const dir = join(work, 'baseline');
  mkdirSync(dir, { recursive: true });
  const tar = spawnSync('git', ['archive', '--format=tar', commit], { cwd: REPO_DIR, maxBuffer: 1 << 30 });
  if (tar.status !== 0) throw new Error(`git archive ${commit}: ${tar.stderr}`);
  const untar = spawnSync('tar', ['-x', '-C', dir], { input: tar.stdout });
  if (untar.status !== 0) throw new Error(`unpacking ${commit}: ${untar.stderr}`);
  symlinkSync(join(REPO_DIR, 'node_modules'), join(dir, 'node_modules'));
  const tsc = spawnSync(process.execPath, [join(REPO_DIR, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: dir });
  if (tsc.status !== 0) throw new Error(`building ${commit}: ${tsc.stdout}${tsc.stderr}`);
  const main = join(dir, 'dist/main.js');
  // Its rows run with one worker thread, as this tree's rows beside them do; a build from before worker
  // threads has one anyway, and would refuse the key.
  return { ref, commit, main, workers: knowsWorkers(main, join(work, 'baseline-probe')) ? 1 : null };
}

/**
 * The command as a reader would type it again: the BENCH_* variables this run was given (but BENCH_OUT,
 * where the JSON went), then `npm run bench`.
 */
function commandLine() {
  const vars = Object.entries(process.env)
    .filter(([k, v]) => k.startsWith('BENCH_') && k !== 'BENCH_OUT' && v !== '')
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${/^[\w.,:/@-]+$/.test(v) ? v : `'${v.replace(/'/g, "'\\''")}'`}`);
  return [...vars, 'npm run bench'].join(' ');
}

/** Logs of the latest runs kept under bench/out/logs/, one folder per run. */
const LOG_RUNS_KEPT = 5;

/**
 * A fresh folder for this run's process logs. Older runs beyond the last few are pruned; a run's own
 * folder is never shared, so two benches started by mistake at once do not overwrite each other's logs.
 */
function newLogDir() {
  const root = join(OUT_DIR, 'logs');
  mkdirSync(root, { recursive: true });
  const old = readdirSync(root).sort();
  for (const name of old.slice(0, Math.max(0, old.length - (LOG_RUNS_KEPT - 1))))
    rmSync(join(root, name), { recursive: true, force: true });
  return join(root, `${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}`);
}

async function main() {
  const read = readSettings();
  if (read.errors) {
    process.stderr.write(`bench: bad settings:\n  ${read.errors.join('\n  ')}\n`);
    return 2;
  }
  const { settings } = read;
  const sections = settings.sections.length ? SECTIONS.filter((s) => settings.sections.includes(s.id)) : SECTIONS;
  const unknown = settings.sections.filter((id) => !SECTIONS.some((s) => s.id === id));
  if (unknown.length) {
    process.stderr.write(`bench: unknown BENCH_SECTIONS ${unknown.join(', ')}; known: ${SECTIONS.map((s) => s.id).join(', ')}\n`);
    return 2;
  }

  // A section that needs a missing tool is reported as skipped; the others still run.
  const installed = { wrk: hasWrk() };
  const missingFor = (section) => (section.needs ?? []).filter((tool) => !installed[tool]);
  const blocked = sections.filter((s) => missingFor(s).length);
  if (blocked.length) {
    process.stdout.write(
      `bench: wrk is not installed, so ${blocked.map((s) => s.id).join(', ')} cannot be measured. Install it with:\n  ${INSTALL_HINT}\n`,
    );
  }
  if (blocked.length === sections.length) return 0;
  const nginx = nginxPath();
  if (!nginx)
    process.stdout.write(`bench: nginx is not installed; the nginx comparisons are skipped. Install it with:\n  ${INSTALL_HINT}\n`);
  if (!settings.pin) disablePinning();
  else if (!canPin()) process.stdout.write('bench: taskset not found (util-linux); processes are not pinned, figures are noisier\n');
  settings.pin = canPin();
  if (settings.pin && cpus().length < 2) process.stdout.write('bench: fewer than 2 cores; wrk competes with the server under test\n');

  stopChildrenOnExit();
  // This process only waits and samples /proc, but it stays off the server's core all the same.
  pinSelf(settings.loadCore);
  const work = mkdtempSync(join(tmpdir(), 'chaingate-bench-'));
  // Also on Ctrl-C, which exits from the signal handler without reaching the finally below.
  process.on('exit', () => rmSync(work, { recursive: true, force: true }));
  const logDir = newLogDir();
  setLogDir(logDir);
  const result = {
    date: new Date().toISOString(),
    commit: gitCommit(),
    environment: {
      node: process.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
      wrk: installed.wrk ? wrkVersion() : null,
      nginx: nginx ? nginxVersion(nginx) : null,
    },
    settings,
    command: commandLine(),
    request: REQUEST,
    sections: [],
  };
  try {
    let baseline = null;
    if (settings.baseline) {
      log(`building the baseline, ${settings.baseline}`);
      baseline = buildBaseline(settings.baseline, work);
      result.baseline = { ref: baseline.ref, commit: baseline.commit, workers: baseline.workers };
    }
    const ctx = { settings, tools: { nginx }, tmpdir: work, body: REQUEST, script: writePostScript(work, REQUEST), log, baseline };
    for (const section of sections) {
      const missing = missingFor(section);
      if (missing.length) {
        const runs = [notRun({ id: section.id, label: section.title, reason: `${missing.join(', ')} not installed` })];
        result.sections.push({ id: section.id, title: section.title, runs, checks: [] });
        continue;
      }
      const rounds = [];
      for (let round = 1; round <= settings.rounds; round++) {
        log(`section ${section.id}: ${section.title}${settings.rounds > 1 ? `, round ${round}/${settings.rounds}` : ''}`);
        rounds.push(await section.run({ ...ctx, section: section.id, round, tmpdir: join(work, `${section.id}-${round}`) }));
      }
      const runs = mergeRounds(rounds);
      result.sections.push({ id: section.id, title: section.title, runs, checks: section.checks(runs) });
    }
  } finally {
    await stopAll();
    rmSync(work, { recursive: true, force: true });
  }

  const out = resolve(settings.out ?? join(OUT_DIR, 'latest.json'));
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify(result, null, 2) + '\n');

  process.stdout.write('\n' + result.sections.map(sectionText).join('\n\n') + '\n');
  process.stdout.write(`\nFor bench/RESULTS.md:\n\n${markdownHeading(result)}\n\n${result.sections.map(sectionMarkdown).join('\n\n')}\n`);
  process.stdout.write(`\nJSON: ${shownPath(out)}\nLogs of every process: ${shownPath(logDir)}\n`);
  if (settings.cpuProfDir)
    process.stdout.write(
      `CPU profiles, a folder per row and round: ${shownPath(settings.cpuProfDir)} (node bench/profile-summary.mjs <folder>)\n`,
    );

  const runs = result.sections.flatMap((s) => s.runs);
  const checks = result.sections.flatMap((s) => s.checks ?? []);
  const errored = runs.filter((r) => r.errors.length);
  for (const r of errored) process.stdout.write(`\nERROR in "${r.label}":\n  ${r.errors.join('\n  ')}\n`);
  const failed = checks.filter((c) => c.status === 'FAIL');
  // Errors void figures, so they always fail the command; missed targets only under BENCH_STRICT.
  if (errored.length) return 1;
  return settings.strict && failed.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  async (err) => {
    process.stderr.write(`bench: ${err.stack ?? err}\n`);
    await stopAll();
    process.exit(1);
  },
);
