// Section: what recording each call's latency costs (issue 36 §1: at most 2 % CPU per call). (a) Keyed,
// metered eth_getBalance through this build against BENCH_BASELINE's (the build before issue 36), back to
// back in every round in front of one fixed upstream, taking turns at going first: CPU per call at most 1.02
// (without BENCH_BASELINE, skipped). (b) In this process, on this tree's build: what PendingUsage.count costs
// with a latency (its clock read and its bucket) over the same count without one, in ns, and that as a share
// of (a)'s CPU per call. See bench/README.md (latency-recording).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { checkerFor, median, versusBaseline } from './lib/checks.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { measureGatewayRow } from './lib/gateway-run.mjs';
import { notRun } from './lib/measure.mjs';
import { inTurn } from './lib/rounds.mjs';
import { startFixedUpstream } from './lib/upstreams.mjs';
import { writePostScript } from './lib/wrk.mjs';

export const id = 'latency-recording';
export const title = 'Latency recording (issue 36): keyed, metered eth_getBalance against the baseline build (fixed upstream)';
/** Tools this section cannot run without (run.mjs skips it when one is missing). */
export const needs = ['wrk'];

const TARGETS = {
  cpuBaseline: 1.02, // CPU per call this build / baseline at most (issue 36, "Done when": 2 % per call)
  sharePercent: 2, // the recording's own ns per call, in % of a whole call's CPU, at most
};

/** Figures kept for each round of a merged run, which the checks pair round by round (lib/rounds.mjs). */
const ROUND_FIELDS = ['cpuUsPerRequest', 'recordingNs'];

/** Counts timed in process per reading, and readings (the median is kept). */
const COUNTS = 2_000_000;
const READINGS = 5;

/**
 * ns per count of `usage.count` with a latency minus without, on this tree's build (dist/): the keys a
 * keyed load meets (one endpoint, one method, one minute), as the pipeline calls it after each answer.
 */
export async function recordingNs() {
  const { createPendingUsage } = await import(pathToFileURL(join(import.meta.dirname, '../dist/metering/usage-rows.js')).href);
  const reading = (timed) => {
    const usage = createPendingUsage();
    const started = performance.now();
    const before = process.cpuUsage();
    for (let i = 0; i < COUNTS; i++) {
      if (timed) usage.count(1, 'ep_bench', 'eth_getBalance', 0, 60_000, 1, 15, performance.now() - started);
      else usage.count(1, 'ep_bench', 'eth_getBalance', 0, 60_000, 1, 15);
    }
    const used = process.cpuUsage(before);
    return ((used.user + used.system) * 1000) / COUNTS;
  };
  const pairs = [];
  for (let r = 0; r < READINGS; r++) pairs.push(reading(true) - reading(false));
  return Math.max(0, median(pairs));
}

export async function run(sectionCtx) {
  mkdirSync(sectionCtx.tmpdir, { recursive: true });
  const bodies = forwardedBodies(sectionCtx.settings.connections);
  const ctx = { ...sectionCtx, body: bodies[0], script: writePostScript(sectionCtx.tmpdir, bodies, 'latency-recording.lua') };
  const base = ctx.baseline;
  const rows = [
    { id: 'timed', label: 'chaingate (API key, metered, latency recorded) → fixed upstream' },
    ...(base
      ? [{ id: 'baseline', label: `chaingate @${base.ref} (API key, metered) → fixed upstream`, main: base.main, workers: base.workers }]
      : []),
  ];
  let upstream;
  try {
    upstream = await startFixedUpstream({ name: 'latency-upstream', core: ctx.settings.loadCore });
  } catch (err) {
    return rows.map(({ id, label }) => notRun({ id, label, reason: `upstream did not start: ${err.message}`, error: true }));
  }
  const runs = [];
  try {
    for (const row of inTurn(rows, ctx.round))
      runs.push(await measureGatewayRow({ ...row, name: `chaingate-${row.id}`, upstream, keyed: true, roundFields: ROUND_FIELDS, ctx }));
  } finally {
    await upstream.stop();
  }
  // Kept with this build's row, so each round has its own reading (after the load: nothing else runs).
  const timed = runs.find((x) => x.id === 'timed');
  if (timed && !timed.skipped) timed.recordingNs = await recordingNs().catch(() => null);
  return rows.map((r) => runs.find((x) => x.id === r.id));
}

const check = checkerFor();

export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  return [
    ...versusBaseline(check, {
      what: 'this build / baseline, keyed, fixed upstream',
      run: by.timed,
      baseline: by.baseline,
      cpuAtMost: TARGETS.cpuBaseline,
    }),
    check('ns per call of the latency recording, in process', [by.timed], (c) => c.recordingNs, 'reported'),
    check(
      'latency recording, % of the CPU per call, keyed',
      [by.timed],
      (c) => (100 * c.recordingNs) / (c.cpuUsPerRequest * 1000),
      `≤ ${TARGETS.sharePercent}`,
      (v) => v <= TARGETS.sharePercent,
    ),
  ];
}
