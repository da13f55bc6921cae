// Section: chaingate's public JSON-RPC path as a plain HTTP proxy, side by side with nginx, first in
// front of a fixed-answer upstream (what the proxy itself costs), then in front of anvil (a real node).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startChaingate } from './lib/chaingate.mjs';
import { measure, notRun } from './lib/measure.mjs';
import { checkerFor } from './lib/checks.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { startNginxProxy } from './lib/nginx.mjs';
import { anvilPath, FIXED_UPSTREAM_CHAIN_ID, startAnvil, startFixedUpstream } from './lib/upstreams.mjs';
import { writePostScript } from './lib/wrk.mjs';

export const id = 'http-proxy';
export const title = 'HTTP JSON-RPC proxy (eth_getBalance, public path)';
/** Tools this section cannot run without (run.mjs skips it when one is missing). */
export const needs = ['wrk'];

/** Targets of this section; a check whose inputs errored or were skipped reads ERROR/SKIP, never PASS. */
const TARGETS = {
  rpsFixed: 0.7, // chaingate/nginx req/s, fixed upstream
  rpsAnvil: 0.9, // chaingate/nginx req/s, anvil
  p99: 2, // chaingate p99 / nginx p99
  rssMb: 110, // chaingate RSS at most
  // Against BENCH_BASELINE's build, in the same run: a change keeps req/s within 5 % and RSS no higher
  // than the 5 % two runs of one build differ by.
  rpsBaseline: 0.95,
  // Metrics on (the default) against off, same build, same run: what counting every request costs.
  rpsMetrics: 0.97,
  rssBaseline: 1.05,
  // CPU per forwarded call with two worker threads over one, same run: what sharing state costs.
  cpuWorkers: 1.1,
  // req/s with two worker threads over nginx with two worker processes: the goal, reported
  // beside it and not judged (see bench/README.md).
  rpsWorkersGoal: 1,
};

/** Figures kept for each round of a merged run, which the checks pair round by round (lib/rounds.mjs). */
const ROUND_FIELDS = ['cpuUsPerRequest'];

/** Starts a server and measures it; a server that fails to start becomes a flagged run, not a crash. */
async function measureServer({ id, label, start, upstreamPid, ctx }) {
  let server;
  try {
    server = await start();
  } catch (err) {
    return notRun({ id, label, reason: `did not start: ${err.message}`, error: true });
  }
  try {
    const url = server.url ?? `http://127.0.0.1:${server.port}/`;
    return { ...(await measure({ id, label, url, pid: server.pid, upstreamPid, ctx })), roundFields: ROUND_FIELDS };
  } finally {
    await server.stop();
  }
}

/**
 * Measures `<upstream> alone`, `nginx → <upstream>`, `chaingate → <upstream>` (public and keyed, and
 * with BENCH_BASELINE the baseline commit's build the same two ways). The upstream measured
 * alone is the server under test on the server core; behind a proxy, a fresh one runs on the load core
 * with wrk, as in the baselines. On the fixed upstream, nginx with 2 worker processes and chaingate with
 * 2 worker threads besides, each spread over both cores, and chaingate with 2 worker threads on the server
 * core alone; every other chaingate row has `workers: 1`.
 */
async function measureTrio({ key, name, startUpstream, chainId, ctx }) {
  const { settings, tools, tmpdir } = ctx;
  const fixed = key === 'fixed';
  const nginxRuns = [
    { id: `nginx-${key}`, label: `nginx → ${name}`, workers: 1, core: settings.serverCore },
    ...(fixed ? [{ id: `nginx2-${key}`, label: `nginx ×2 → ${name}`, workers: 2, core: settings.spreadCores }] : []),
  ];
  // This tree's gateway, public and keyed; with BENCH_BASELINE, the baseline commit's build beside it.
  const base = ctx.baseline;
  const gateways = [
    { id: `chaingate-${key}`, label: fixed ? `chaingate (workers: 1) → ${name}` : `chaingate → ${name}` },
    // Right after the one-thread row, so that the two CPU figures the workers' check pairs are minutes closer.
    ...(fixed
      ? [
          // Both workers on the server core, as the one-thread row: the same placement, so the CPU ratio is what
          // sharing costs. Spread over both cores (the next row) they also share core 1 with wrk and the upstream.
          { id: `chaingate-w2core-${key}`, label: `chaingate (workers: 2, server core) → ${name}`, workers: 2 },
          { id: `chaingate-w2-${key}`, label: `chaingate (workers: 2) → ${name}`, workers: 2, core: settings.spreadCores },
        ]
      : []),
    { id: `chaingate-keyed-${key}`, label: `chaingate (API key, metered) → ${name}`, keyed: true },
    // What the metrics cost: the same public path with metrics: { enabled: false } (nothing counted).
    ...(fixed
      ? [{ id: `chaingate-nometrics-${key}`, label: `chaingate (metrics off) → ${name}`, extraYaml: 'metrics: { enabled: false }\n' }]
      : []),
    ...(base
      ? [
          { id: `baseline-${key}`, label: `chaingate @${base.ref} → ${name}`, main: base.main, workers: base.workers },
          {
            id: `baseline-keyed-${key}`,
            label: `chaingate @${base.ref} (API key) → ${name}`,
            keyed: true,
            main: base.main,
            workers: base.workers,
          },
        ]
      : []),
  ];
  const runs = [
    await measureServer({
      id: key,
      label: `${name} alone`,
      ctx,
      start: () => startUpstream({ name: `${key}-alone`, core: settings.serverCore }),
    }),
  ];

  let upstream;
  try {
    upstream = await startUpstream({ name: `${key}-upstream`, core: settings.loadCore });
  } catch (err) {
    const reason = `upstream did not start: ${err.message}`;
    return [...runs, ...[...nginxRuns, ...gateways].map(({ id, label }) => notRun({ id, label, reason, error: true }))];
  }
  try {
    for (const { id, label, workers, core } of nginxRuns) {
      runs.push(
        tools.nginx
          ? await measureServer({
              id,
              label,
              upstreamPid: upstream.pid,
              ctx,
              start: () =>
                startNginxProxy({ bin: tools.nginx, name: id, dir: join(tmpdir, id), upstreamPort: upstream.port, core, workers }),
            })
          : notRun({ id, label, reason: 'nginx not installed' }),
      );
    }
    for (const { id, label, keyed = false, main, extraYaml, workers = 1, core = settings.serverCore } of gateways) {
      runs.push(
        await measureServer({
          id,
          label,
          upstreamPid: upstream.pid,
          ctx,
          start: () =>
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
            }),
        }),
      );
    }
  } finally {
    await upstream.stop();
  }
  return runs;
}

const usable = (run) => run && !run.skipped && run.errors.length === 0 && run.rps != null;
const check = checkerFor(usable);

/** The section's targets, judged on its runs (merged across rounds by the caller). */
export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  const ratio = (a, b) => a / b;
  return [
    ...nginxChecks(by, ratio),
    check(
      'req/s chaingate metrics on / off, fixed upstream',
      [by['chaingate-fixed'], by['chaingate-nometrics-fixed']],
      (on, off) => ratio(on.rps, off.rps),
      `≥ ${TARGETS.rpsMetrics}`,
      (v) => v >= TARGETS.rpsMetrics,
    ),
    ...workerChecks(by, ratio),
    ...baselineChecks(by, ratio),
  ];
}

/**
 * Two worker threads against one, and against nginx with two worker processes, on the fixed upstream.
 * CPU per call is the process's utime + stime (every thread's, /proc/<pid>/stat) over the calls wrk
 * completed, each one forwarded. The ratios without a target are figures, reported (INFO), not judged.
 */
function workerChecks(by, ratio) {
  const [one, twoCore, two] = [by['chaingate-fixed'], by['chaingate-w2core-fixed'], by['chaingate-w2-fixed']];
  const cpu = (a, b) => ratio(a.cpuUsPerRequest, b.cpuUsPerRequest);
  return [
    check(
      'CPU per call chaingate workers: 2 / workers: 1, both on the server core, fixed upstream',
      [twoCore, one],
      cpu,
      `≤ ${TARGETS.cpuWorkers}`,
      (v) => v <= TARGETS.cpuWorkers,
    ),
    // Spread over both cores, two workers share core 1 with wrk and the upstream: four busy threads on two
    // cores, preempting each other. What that costs is reported, not judged: a machine with a core per
    // worker and the load elsewhere does not pay it.
    check('CPU per call chaingate workers: 2 on both cores / workers: 1, fixed upstream', [two, one], cpu, 'reported'),
    check(
      'req/s chaingate workers: 2 / nginx ×2, fixed upstream',
      [two, by['nginx2-fixed']],
      (c, n) => ratio(c.rps, n.rps),
      `goal ≥ ${TARGETS.rpsWorkersGoal}`,
    ),
    // What a second worker (and core) buys each server, on a machine whose second core also runs the load.
    check('req/s chaingate workers: 2 / workers: 1, fixed upstream', [two, one], (a, b) => ratio(a.rps, b.rps), 'reported'),
    check('req/s nginx ×2 / nginx, fixed upstream', [by['nginx2-fixed'], by['nginx-fixed']], (a, b) => ratio(a.rps, b.rps), 'reported'),
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

/** The proxy against nginx in front of the same upstream. */
function nginxChecks(by, ratio) {
  return [
    check(
      'req/s chaingate / nginx, fixed upstream',
      [by['chaingate-fixed'], by['nginx-fixed']],
      (c, n) => ratio(c.rps, n.rps),
      `≥ ${TARGETS.rpsFixed}`,
      (v) => v >= TARGETS.rpsFixed,
    ),
    check(
      'req/s chaingate / nginx, anvil',
      [by['chaingate-anvil'], by['nginx-anvil']],
      (c, n) => ratio(c.rps, n.rps),
      `≥ ${TARGETS.rpsAnvil}`,
      (v) => v >= TARGETS.rpsAnvil,
    ),
    check(
      'p99 chaingate / nginx, fixed upstream',
      [by['chaingate-fixed'], by['nginx-fixed']],
      (c, n) => ratio(c.p99Ms, n.p99Ms),
      `≤ ${TARGETS.p99}`,
      (v) => v <= TARGETS.p99,
    ),
    check(
      'p99 chaingate / nginx, anvil',
      [by['chaingate-anvil'], by['nginx-anvil']],
      (c, n) => ratio(c.p99Ms, n.p99Ms),
      `≤ ${TARGETS.p99}`,
      (v) => v <= TARGETS.p99,
    ),
    check(
      'chaingate max RSS (MB), fixed upstream',
      [by['chaingate-fixed']],
      (c) => c.maxRssMb,
      `≤ ${TARGETS.rssMb}`,
      (v) => v <= TARGETS.rssMb,
    ),
    check(
      'chaingate max RSS (MB), anvil',
      [by['chaingate-anvil']],
      (c) => c.maxRssMb,
      `≤ ${TARGETS.rssMb}`,
      (v) => v <= TARGETS.rssMb,
    ),
    // The keyed path adds key lookup, the plan's limiter and RU metering: it must keep the same targets.
    check(
      'req/s chaingate keyed / nginx, fixed upstream',
      [by['chaingate-keyed-fixed'], by['nginx-fixed']],
      (c, n) => ratio(c.rps, n.rps),
      `≥ ${TARGETS.rpsFixed}`,
      (v) => v >= TARGETS.rpsFixed,
    ),
    check(
      'req/s chaingate keyed / nginx, anvil',
      [by['chaingate-keyed-anvil'], by['nginx-anvil']],
      (c, n) => ratio(c.rps, n.rps),
      `≥ ${TARGETS.rpsAnvil}`,
      (v) => v >= TARGETS.rpsAnvil,
    ),
    check(
      'chaingate keyed max RSS (MB), fixed upstream',
      [by['chaingate-keyed-fixed']],
      (c) => c.maxRssMb,
      `≤ ${TARGETS.rssMb}`,
      (v) => v <= TARGETS.rssMb,
    ),
  ];
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
