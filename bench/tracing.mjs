// Section: what OpenTelemetry tracing (src/pipeline/tracing.ts) costs a whole forwarded call (issue 33 §4: with
// sampling at 1 %, at most 3 % more CPU per call than with tracing off). Keyed, metered gateways in front of one
// fixed upstream, measured back to back in every round, taking turns at going first: tracing off (the default),
// tracing on at sample_ratio 0.01, and at 1 (every call traced, reported only). The traced ones export to a sink
// in this process, a tiny HTTP server answering every POST 200, as a collector would. That tracing off costs
// nothing beside a build without it is forward-cost's measure against BENCH_BASELINE. See bench/README.md (tracing).
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { checkerFor } from './lib/checks.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { measureGatewayRow } from './lib/gateway-run.mjs';
import { notRun } from './lib/measure.mjs';
import { inTurn } from './lib/rounds.mjs';
import { startFixedUpstream } from './lib/upstreams.mjs';
import { writePostScript } from './lib/wrk.mjs';

export const id = 'tracing';
export const title = 'Tracing: keyed, metered eth_getBalance with tracing off, at 1 % and at 100 % (fixed upstream)';
/** Tools this section cannot run without (run.mjs skips it when one is missing). */
export const needs = ['wrk'];

const TARGETS = {
  cpu: 1.03, // CPU per call traced at 1 % / tracing off at most (issue 33, §4)
};

/** Figures kept for each round of a merged run, which the checks pair round by round (lib/rounds.mjs). */
const ROUND_FIELDS = ['cpuUsPerRequest', 'spansReceived'];

/** An OTLP/HTTP sink: answers every request 200 and counts the bodies (so a traced row shows it exported). */
async function startSink() {
  let bodies = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      bodies++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}/v1/traces`,
    bodies: () => bodies,
    stop: () => new Promise((r) => server.close(() => r())),
  };
}

/** One row through lib/gateway-run.mjs, keyed; its spans are what the sink got from its start to its stop. */
async function measureGateway({ id, label, ratio, upstream, sink, ctx }) {
  const tracing = ratio === null ? '' : `tracing: { otlp_endpoint: '${sink.url}', sample_ratio: ${ratio} }\n`;
  const before = sink.bodies();
  // The graceful stop, before measureGatewayRow returns, flushes the spans still buffered: what the sink got by
  // then is the row's.
  const run = await measureGatewayRow({ id, label, name: `chaingate-${id}`, upstream, keyed: true, extraYaml: tracing, ctx });
  const spansReceived = sink.bodies() - before;
  if (ratio !== null && ratio > 0 && spansReceived === 0 && !run.skipped) run.warnings.push('the sink received no spans');
  return { ...run, spansReceived, roundFields: ROUND_FIELDS };
}

export async function run(sectionCtx) {
  mkdirSync(sectionCtx.tmpdir, { recursive: true });
  const bodies = forwardedBodies(sectionCtx.settings.connections);
  const script = writePostScript(sectionCtx.tmpdir, bodies, 'tracing.lua');
  const ctx = { ...sectionCtx, body: bodies[0], script };
  const rows = [
    { id: 'off', label: 'chaingate (API key, metered), tracing off → fixed upstream', ratio: null },
    { id: 'one-percent', label: 'chaingate (API key, metered), tracing at sample_ratio 0.01 → fixed upstream', ratio: 0.01 },
    { id: 'all', label: 'chaingate (API key, metered), tracing at sample_ratio 1 → fixed upstream', ratio: 1 },
  ];
  let upstream;
  let sink;
  try {
    upstream = await startFixedUpstream({ name: 'tracing-upstream', core: ctx.settings.loadCore });
    sink = await startSink();
  } catch (err) {
    await upstream?.stop();
    return rows.map(({ id, label }) => notRun({ id, label, reason: `upstream or sink did not start: ${err.message}`, error: true }));
  }
  const runs = [];
  try {
    // The rows take turns at going first, round by round (lib/rounds.mjs); the table lists them in order.
    for (const row of inTurn(rows, ctx.round)) runs.push(await measureGateway({ ...row, upstream, sink, ctx }));
  } finally {
    await upstream.stop();
    await sink.stop();
  }
  return rows.map((r) => runs.find((x) => x.id === r.id));
}

const check = checkerFor();

export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  return [
    check(
      'CPU per call traced at 1 % / tracing off, fixed upstream',
      [by['one-percent'], by.off],
      (p, o) => p.cpuUsPerRequest / o.cpuUsPerRequest,
      `≤ ${TARGETS.cpu}`,
      (v) => v <= TARGETS.cpu,
    ),
    check('req/s traced at 1 % / tracing off, fixed upstream', [by['one-percent'], by.off], (p, o) => p.rps / o.rps, 'reported'),
    check(
      'CPU per call traced at 100 % / tracing off, fixed upstream',
      [by.all, by.off],
      (a, o) => a.cpuUsPerRequest / o.cpuUsPerRequest,
      'reported',
    ),
    check('OTLP bodies the sink received at 1 %', [by['one-percent']], (p) => p.spansReceived, 'reported'),
  ];
}
