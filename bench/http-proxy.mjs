// Section: chaingate's public JSON-RPC path as a plain HTTP proxy, side by side with nginx, first in
// front of a fixed-answer upstream (what the proxy itself costs), then in front of anvil (a real node).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startChaingate } from './lib/chaingate.mjs';
import { checkerFor } from './lib/checks.mjs';
import { measure, notRun } from './lib/measure.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { startNginxProxy } from './lib/nginx.mjs';
import { cpuProfArgs, stopGraceMs } from './lib/profiles.mjs';
import { inTurn } from './lib/rounds.mjs';
import { anvilPath, FIXED_UPSTREAM_CHAIN_ID, startAnvil, startFixedUpstream } from './lib/upstreams.mjs';
import { writePostScript } from './lib/wrk.mjs';

export const id = 'http-proxy';
export const title = 'HTTP JSON-RPC proxy (eth_getBalance, public path)';
/** Tools this section cannot run without (run.mjs skips it when one is missing). */
export const needs = ['wrk'];

/**
 * Targets of this section; a check whose inputs errored or were skipped reads ERROR/SKIP, never PASS. Each
 * ratio is the median of per-round ratios of two rows measured back to back (see measureTrio).
 */
const TARGETS = {
  // Issue 30's targets.
  rpsFixed: 1, // chaingate (workers: 1) / nginx req/s, one core each, fixed upstream, at least
  p99: 1.2, // chaingate p99 / nginx p99, same load, at most (on both upstreams)
  rpsKeyed: 0.95, // keyed metered / public chaingate req/s, fixed upstream, at least
  rpsWorkers: 1, // chaingate workers: 2 / nginx worker_processes 2 req/s, everything unpinned, at least
  rssMb: 100, // chaingate RSS under the proxy load, one worker, at most
  // In front of anvil, where the node's time dominates: public and keyed against nginx.
  rpsAnvil: 0.9,
  // Against BENCH_BASELINE's build, in the same run: a change keeps req/s within 5 % and RSS no higher
  // than the 5 % two runs of one build differ by.
  rpsBaseline: 0.95,
  // Metrics on (the default) against off, same build, same run: what counting every request costs.
  rpsMetrics: 0.97,
  rssBaseline: 1.05,
  // CPU per forwarded call with two worker threads over one, both on the server core: what sharing state costs.
  cpuWorkers: 1.1,
};

/** Figures kept for each round of a merged run, which the checks pair round by round (lib/rounds.mjs). */
const ROUND_FIELDS = ['cpuUsPerRequest'];

/** Metrics on, as by default, on a port of their own: 9464 may be another bench's on a shared machine. */
const METRICS_YAML = 'metrics: { port: 0 }\n';

/** Starts a server and measures it; a server that fails to start becomes a flagged run, not a crash. */
async function measureServer({ id, label, start, upstreamPid, loadCore, ctx }) {
  let server;
  try {
    server = await start();
  } catch (err) {
    return notRun({ id, label, reason: `did not start: ${err.message}`, error: true });
  }
  try {
    const url = server.url ?? `http://127.0.0.1:${server.port}/`;
    return { ...(await measure({ id, label, url, pid: server.pid, upstreamPid, loadCore, ctx })), roundFields: ROUND_FIELDS };
  } finally {
    await server.stop(stopGraceMs(ctx));
  }
}

/** One row (nginx or chaingate, see rowsOf) measured in front of `upstream`, wrk on `loadCore`. */
function measureRow(row, { upstream, loadCore, chainId, ctx }) {
  const { id, label, nginx = false, workers = 1, core, keyed = false, main, extraYaml = METRICS_YAML } = row;
  const { tools, tmpdir } = ctx;
  const common = { id, label, upstreamPid: upstream.pid, loadCore, ctx };
  if (nginx) {
    if (!tools.nginx) return notRun({ id, label, reason: 'nginx not installed' });
    const start = () => startNginxProxy({ bin: tools.nginx, name: id, dir: join(tmpdir, id), upstreamPort: upstream.port, core, workers });
    return measureServer({ ...common, start });
  }
  const start = () =>
    startChaingate({
      name: id,
      dir: join(tmpdir, id),
      upstreamPort: upstream.port,
      chainId,
      core,
      keyed,
      workers,
      main,
      extraYaml,
      nodeArgs: cpuProfArgs(ctx, id),
    });
  return measureServer({ ...common, start });
}

/**
 * The rows in front of one upstream, in groups: each group has an upstream of its own, started on the
 * group's `loadCore` (where wrk runs too), and its `turns` run back to back in the order of the round
 * (lib/rounds.mjs inTurn), so that every judged pair of rows is measured one right after the other:
 * nginx and chaingate (workers: 1), chaingate and its keyed row; with two workers, nginx ×2 and
 * chaingate (workers: 2), everything unpinned. `after` rows (BENCH_BASELINE's) follow the turns.
 */
function rowsOf(key, name, ctx) {
  const { settings, baseline: base } = ctx;
  const fixed = key === 'fixed';
  const one = settings.serverCore;
  const nginx = { id: `nginx-${key}`, label: `nginx → ${name}`, nginx: true, core: one };
  const gateway = { id: `chaingate-${key}`, label: fixed ? `chaingate (workers: 1) → ${name}` : `chaingate → ${name}`, core: one };
  const keyed = { id: `chaingate-keyed-${key}`, label: `chaingate (API key, metered) → ${name}`, keyed: true, core: one };
  const after = base
    ? [
        { id: `baseline-${key}`, label: `chaingate @${base.ref} → ${name}`, main: base.main, workers: base.workers, core: one },
        {
          id: `baseline-keyed-${key}`,
          label: `chaingate @${base.ref} (API key) → ${name}`,
          keyed: true,
          main: base.main,
          workers: base.workers,
          core: one,
        },
      ]
    : [];
  if (!fixed) return [{ loadCore: settings.loadCore, turns: [nginx, gateway, keyed], after }];
  // Two workers on the server core, as the one-worker row: the same placement, so the CPU ratio is what
  // sharing costs. What the metrics cost: the public path with metrics: { enabled: false } (nothing counted).
  const w2core = { id: `chaingate-w2core-${key}`, label: `chaingate (workers: 2, server core) → ${name}`, workers: 2, core: one };
  const noMetrics = {
    id: `chaingate-nometrics-${key}`,
    label: `chaingate (metrics off) → ${name}`,
    extraYaml: 'metrics: { enabled: false }\n',
    core: one,
  };
  const all = settings.unpinnedCores;
  return [
    { loadCore: settings.loadCore, turns: [w2core, nginx, gateway, keyed, noMetrics], after },
    {
      loadCore: all,
      unpinned: true,
      turns: [
        { id: `nginx2-${key}`, label: `nginx ×2, unpinned → ${name}`, nginx: true, workers: 2, core: all },
        { id: `chaingate-w2-${key}`, label: `chaingate (workers: 2, unpinned) → ${name}`, workers: 2, core: all },
      ],
      after: [],
    },
  ];
}

/**
 * Measures `<upstream> alone`, then the rows of rowsOf in front of it: on the fixed upstream nginx (one
 * worker, and two), chaingate with one worker (public, keyed, metrics off) and two, and with
 * BENCH_BASELINE the baseline commit's build; on anvil nginx and chaingate public and keyed. The upstream
 * measured alone is the server under test on the server core; behind a proxy, a fresh one runs on the
 * load core with wrk, or unpinned with everything else for the unpinned rows. Runs are returned in the
 * order of rowsOf, whatever order the round measured them in.
 */
async function measureTrio({ key, name, startUpstream, chainId, ctx }) {
  const { settings } = ctx;
  const runs = [
    await measureServer({
      id: key,
      label: `${name} alone`,
      ctx,
      start: () => startUpstream({ name: `${key}-alone`, core: settings.serverCore }),
    }),
  ];
  for (const group of rowsOf(key, name, ctx)) {
    const rows = [...group.turns, ...group.after];
    const measured = [];
    let upstream;
    try {
      upstream = await startUpstream({ name: `${key}-upstream${group.unpinned ? '-unpinned' : ''}`, core: group.loadCore });
    } catch (err) {
      const reason = `upstream did not start: ${err.message}`;
      runs.push(...rows.map(({ id, label }) => notRun({ id, label, reason, error: true })));
      continue;
    }
    try {
      for (const row of [...inTurn(group.turns, ctx.round), ...group.after])
        measured.push(await measureRow(row, { upstream, loadCore: group.loadCore, chainId, ctx }));
    } finally {
      await upstream.stop();
    }
    runs.push(...rows.map((row) => measured.find((r) => r.id === row.id)));
  }
  return runs;
}

const check = checkerFor();

/** The section's targets, judged on its runs (merged across rounds by the caller). */
export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  const ratio = (a, b) => a / b;
  return [...nginxChecks(by, ratio), ...pathChecks(by, ratio), ...workerChecks(by, ratio), ...baselineChecks(by, ratio)];
}

/** The proxy against nginx in front of the same upstream, one worker each on one core, and its RSS. */
function nginxChecks(by, ratio) {
  const rps = (c, n) => ratio(c.rps, n.rps);
  const p99 = (c, n) => ratio(c.p99Ms, n.p99Ms);
  const rss = (c) => c.maxRssMb;
  const [cg, nginx, cgAnvil, nginxAnvil] = [by['chaingate-fixed'], by['nginx-fixed'], by['chaingate-anvil'], by['nginx-anvil']];
  return [
    check('req/s chaingate / nginx, fixed upstream', [cg, nginx], rps, `≥ ${TARGETS.rpsFixed}`, (v) => v >= TARGETS.rpsFixed),
    check('p99 chaingate / nginx, fixed upstream', [cg, nginx], p99, `≤ ${TARGETS.p99}`, (v) => v <= TARGETS.p99),
    check('req/s chaingate / nginx, anvil', [cgAnvil, nginxAnvil], rps, `≥ ${TARGETS.rpsAnvil}`, (v) => v >= TARGETS.rpsAnvil),
    check('p99 chaingate / nginx, anvil', [cgAnvil, nginxAnvil], p99, `≤ ${TARGETS.p99}`, (v) => v <= TARGETS.p99),
    check('chaingate max RSS (MB), fixed upstream', [cg], rss, `≤ ${TARGETS.rssMb}`, (v) => v <= TARGETS.rssMb),
    check('chaingate max RSS (MB), anvil', [cgAnvil], rss, `≤ ${TARGETS.rssMb}`, (v) => v <= TARGETS.rssMb),
  ];
}

/** The keyed path (key lookup, the plan's limiter, RU metering) and the metrics, against the public path. */
function pathChecks(by, ratio) {
  const rps = (a, b) => ratio(a.rps, b.rps);
  const [cg, keyed] = [by['chaingate-fixed'], by['chaingate-keyed-fixed']];
  return [
    check('req/s chaingate keyed / public, fixed upstream', [keyed, cg], rps, `≥ ${TARGETS.rpsKeyed}`, (v) => v >= TARGETS.rpsKeyed),
    // Follows from the two above (keyed / public × public / nginx); shown so that the keyed path's distance
    // to nginx reads at a glance.
    check('req/s chaingate keyed / nginx, fixed upstream', [keyed, by['nginx-fixed']], rps, 'reported'),
    check(
      'req/s chaingate keyed / nginx, anvil',
      [by['chaingate-keyed-anvil'], by['nginx-anvil']],
      rps,
      `≥ ${TARGETS.rpsAnvil}`,
      (v) => v >= TARGETS.rpsAnvil,
    ),
    check(
      'chaingate keyed max RSS (MB), fixed upstream',
      [keyed],
      (c) => c.maxRssMb,
      `≤ ${TARGETS.rssMb}`,
      (v) => v <= TARGETS.rssMb,
    ),
    check(
      'req/s chaingate metrics on / off, fixed upstream',
      [cg, by['chaingate-nometrics-fixed']],
      rps,
      `≥ ${TARGETS.rpsMetrics}`,
      (v) => v >= TARGETS.rpsMetrics,
    ),
  ];
}

/**
 * Two worker threads against one, and against nginx with two worker processes, on the fixed upstream.
 * CPU per call is the process's utime + stime (every thread's, /proc/<pid>/stat) over the calls wrk
 * completed, each one forwarded. The ratios without a target are figures, reported (INFO), not judged.
 */
function workerChecks(by, ratio) {
  const [one, twoCore, two, nginx2] = [by['chaingate-fixed'], by['chaingate-w2core-fixed'], by['chaingate-w2-fixed'], by['nginx2-fixed']];
  const cpu = (a, b) => ratio(a.cpuUsPerRequest, b.cpuUsPerRequest);
  const rps = (a, b) => ratio(a.rps, b.rps);
  return [
    check(
      'req/s chaingate workers: 2 / nginx ×2, everything unpinned, fixed upstream',
      [two, nginx2],
      rps,
      `≥ ${TARGETS.rpsWorkers}`,
      (v) => v >= TARGETS.rpsWorkers,
    ),
    check(
      'CPU per call chaingate workers: 2 / workers: 1, both on the server core, fixed upstream',
      [twoCore, one],
      cpu,
      `≤ ${TARGETS.cpuWorkers}`,
      (v) => v <= TARGETS.cpuWorkers,
    ),
    // Unpinned, two workers share the machine with wrk and the upstream: four busy threads on two cores,
    // preempting each other. What that costs is reported, not judged: a machine with a core per worker and
    // the load elsewhere does not pay it.
    check('CPU per call chaingate workers: 2 unpinned / workers: 1, fixed upstream', [two, one], cpu, 'reported'),
    // What the whole machine buys each server over one core, when the load runs on the same machine.
    check('req/s chaingate workers: 2 unpinned / workers: 1, fixed upstream', [two, one], rps, 'reported'),
    check('req/s nginx ×2 unpinned / nginx, fixed upstream', [nginx2, by['nginx-fixed']], rps, 'reported'),
  ];
}

/** This build against the baseline's, when the run had one: each upstream, public and keyed. */
function baselineChecks(by, ratio) {
  if (!by['baseline-fixed']) return [];
  return [
    ['fixed', 'fixed upstream'],
    ['keyed-fixed', 'keyed, fixed upstream'],
    ['anvil', 'anvil'],
    ['keyed-anvil', 'keyed, anvil'],
  ].flatMap(([key, name]) => [
    check(
      `req/s chaingate / baseline, ${name}`,
      [by[`chaingate-${key}`], by[`baseline-${key}`]],
      (c, b) => ratio(c.rps, b.rps),
      `≥ ${TARGETS.rpsBaseline}`,
      (v) => v >= TARGETS.rpsBaseline,
    ),
    check(
      `max RSS chaingate / baseline, ${name}`,
      [by[`chaingate-${key}`], by[`baseline-${key}`]],
      (c, b) => ratio(c.maxRssMb, b.maxRssMb),
      `≤ ${TARGETS.rssBaseline}`,
      (v) => v <= TARGETS.rssBaseline,
    ),
  ]);
}

export async function run(sectionCtx) {
  mkdirSync(sectionCtx.tmpdir, { recursive: true });
  const bodies = forwardedBodies(sectionCtx.settings.connections);
  const ctx = { ...sectionCtx, body: bodies[0], script: writePostScript(sectionCtx.tmpdir, bodies, 'http-proxy.lua') };
  const runs = await measureTrio({
    key: 'fixed',
    name: 'fixed upstream',
    startUpstream: startFixedUpstream,
    chainId: FIXED_UPSTREAM_CHAIN_ID,
    ctx,
  });
  if (anvilPath()) {
    const quiet = ctx.settings.anvilQuiet;
    runs.push(
      ...(await measureTrio({ key: 'anvil', name: 'anvil', startUpstream: (o) => startAnvil({ ...o, quiet }), chainId: 31337, ctx })),
    );
  } else {
    for (const [id, label] of [
      ['anvil', 'anvil alone'],
      ['nginx-anvil', 'nginx → anvil'],
      ['chaingate-anvil', 'chaingate → anvil'],
      ['chaingate-keyed-anvil', 'chaingate (API key, metered) → anvil'],
    ]) {
      runs.push(notRun({ id, label, reason: 'anvil not found (npm install, or BENCH_ANVIL=path)' }));
    }
  }
  return runs;
}
