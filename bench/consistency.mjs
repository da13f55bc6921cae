// Section: issue 32 (one chain across many nodes, docs/consistency.md). (a) What the whole feature costs a
// forwarded call on a single-node chain, where none of it can help: this build against BENCH_BASELINE's (the
// build before the issue), back to back in every round in front of one fixed upstream, CPU per call at most
// 1.03. (b) The rate with a quorum of 2 of 3 (consistency.quorum on eth_getBalance, the load's method) in front
// of three fixed upstreams, against the same three upstreams without a quorum: every call then asks three nodes
// and compares their answers, reported as ratios. Without BENCH_BASELINE, (a) is skipped. See bench/README.md
// (consistency).
import { mkdirSync } from 'node:fs';
import { checkerFor, versusBaseline } from './lib/checks.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { measureGatewayRow } from './lib/gateway-run.mjs';
import { notRun } from './lib/measure.mjs';
import { inTurn } from './lib/rounds.mjs';
import { startFixedUpstream } from './lib/upstreams.mjs';
import { writePostScript } from './lib/wrk.mjs';

export const id = 'consistency';
export const title = 'One chain across nodes (issue 32): its cost on one node, and quorum 2 of 3 (eth_getBalance, fixed upstreams)';
/** Tools this section cannot run without (run.mjs skips it when one is missing). */
export const needs = ['wrk'];

const TARGETS = {
  cpuBaseline: 1.03, // CPU per call this build / baseline at most, single-node chain (issue 32, "Done when")
};

/** Figures kept for each round of a merged run, which the checks pair round by round (lib/rounds.mjs). */
const ROUND_FIELDS = ['cpuUsPerRequest'];

/** The quorum of part (b), on the load's method. */
const QUORUM_YAML = 'consistency: { quorum: { methods: [eth_getBalance], nodes: 3, agree: 2 } }';

/** Starts `count` fixed upstreams on the load core; stops those started when one fails. */
async function fixedUpstreams(count, ctx) {
  const started = [];
  try {
    for (let i = 1; i <= count; i++)
      started.push(await startFixedUpstream({ name: `consistency-upstream-${i}`, core: ctx.settings.loadCore }));
  } catch (err) {
    await Promise.all(started.map((u) => u.stop()));
    throw err;
  }
  return started;
}

/** Measures `rows` in the order of this round (lib/rounds.mjs) in front of `upstreams` (one, or three). */
async function measurePair(rows, upstreams, ctx) {
  const runs = [];
  for (const row of inTurn(rows, ctx.round)) {
    const where = upstreams.length === 1 ? { upstream: upstreams[0] } : { upstreams };
    runs.push(await measureGatewayRow({ ...row, ...where, roundFields: ROUND_FIELDS, ctx }));
  }
  return runs;
}

export async function run(sectionCtx) {
  mkdirSync(sectionCtx.tmpdir, { recursive: true });
  const bodies = forwardedBodies(sectionCtx.settings.connections);
  const ctx = { ...sectionCtx, body: bodies[0], script: writePostScript(sectionCtx.tmpdir, bodies, 'consistency.lua') };
  const base = ctx.baseline;
  const single = [
    { id: 'single', label: 'chaingate (workers: 1), one node → fixed upstream' },
    ...(base
      ? [{ id: 'baseline', label: `chaingate @${base.ref}, one node → fixed upstream`, main: base.main, workers: base.workers }]
      : []),
  ];
  const three = [
    { id: 'three', label: 'chaingate (workers: 1), three nodes, no quorum → 3 fixed upstreams' },
    { id: 'quorum', label: 'chaingate (workers: 1), three nodes, quorum 2 of 3 → 3 fixed upstreams', chainYaml: QUORUM_YAML },
  ];
  const all = [...single, ...three];
  let upstreams;
  try {
    upstreams = await fixedUpstreams(3, ctx);
  } catch (err) {
    return all.map(({ id, label }) => notRun({ id, label, reason: `upstreams did not start: ${err.message}`, error: true }));
  }
  const runs = [];
  try {
    runs.push(...(await measurePair(single, upstreams.slice(0, 1), ctx)));
    runs.push(...(await measurePair(three, upstreams, ctx)));
  } finally {
    await Promise.all(upstreams.map((u) => u.stop()));
  }
  return all.map((r) => runs.find((x) => x.id === r.id));
}

const check = checkerFor();

export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  return [
    ...versusBaseline(check, {
      what: 'this build / baseline, single-node chain',
      run: by.single,
      baseline: by.baseline,
      cpuAtMost: TARGETS.cpuBaseline,
    }),
    check('req/s quorum 2 of 3 / no quorum, three nodes', [by.quorum, by.three], (q, n) => q.rps / n.rps, 'reported'),
    check(
      'CPU per call quorum 2 of 3 / no quorum, three nodes',
      [by.quorum, by.three],
      (q, n) => q.cpuUsPerRequest / n.cpuUsPerRequest,
      'reported',
    ),
  ];
}
