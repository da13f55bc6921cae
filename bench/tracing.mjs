// Section: what OpenTelemetry tracing (src/pipeline/tracing.ts) costs a whole forwarded call (issue 33 §4: with
// sampling at 1 %, at most 3 % more CPU per call than with tracing off). One keyed, metered gateway in front of one
// fixed upstream, switched by a reload between tracing off (the default), tracing on at sample_ratio 0.01, at 1
// (every call traced, reported only) and off again (the noise), the rows loaded in turn, slice by slice
// (lib/slices.mjs). Each traced row exports to a sink of its own in this process, a tiny HTTP server answering
// every POST 200, as a collector would. That tracing off costs nothing beside a build without it is forward-cost's
// measure against BENCH_BASELINE. See bench/README.md (tracing).
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { chaingateConfig, startChaingate } from './lib/chaingate.mjs';
import { checkerFor } from './lib/checks.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { measure, notRun } from './lib/measure.mjs';
import { cpuProfArgs, stopGraceMs } from './lib/profiles.mjs';
import { measureInSlices } from './lib/slices.mjs';
import { FIXED_UPSTREAM_CHAIN_ID, startFixedUpstream } from './lib/upstreams.mjs';
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

const ROWS = [
  { id: 'off', label: 'chaingate (API key, metered), tracing off → fixed upstream', ratio: null },
  { id: 'one-percent', label: 'chaingate (API key, metered), tracing at sample_ratio 0.01 → fixed upstream', ratio: 0.01 },
  { id: 'all', label: 'chaingate (API key, metered), tracing at sample_ratio 1 → fixed upstream', ratio: 1 },
  // The same as the first, measured in slices of its own: how far apart two rows that cannot differ read in this run.
  { id: 'off-again', label: 'chaingate (API key, metered), tracing off again (the noise)', ratio: null },
];

/**
 * The gateway's config in the mode of `row` (its `tracing` section sending to the row's sink), as
 * startChaingate writes it, and the same file rewritten for a reload.
 */
function gatewayYaml(row, sinks) {
  const tracing = row.ratio === null ? '' : `tracing: { otlp_endpoint: '${sinks.get(row.id).url}', sample_ratio: ${row.ratio} }\n`;
  return `metrics: { port: 0 }\n${tracing}`;
}

/**
 * One gateway, switched from row to row by a reload (SIGHUP after its config file is rewritten; the `tracing` keys
 * apply on a reload): each process has a speed of its own, a few % apart from the next one's (the "noise" row of
 * separate gateways read 1.07), which a 3 % target cannot stand beside. `switchTo(row)` resolves once the gateway
 * logged the reload.
 */
async function startSwitchedGateway(upstream, sinks, ctx) {
  const dir = join(ctx.tmpdir, 'gateway');
  const g = await startChaingate({
    name: 'chaingate-tracing',
    dir,
    upstreamPort: upstream.port,
    chainId: FIXED_UPSTREAM_CHAIN_ID,
    core: ctx.settings.serverCore,
    keyed: true,
    extraYaml: gatewayYaml(ROWS[0], sinks),
    nodeArgs: cpuProfArgs(ctx, 'gateway'),
  });
  // The config in force; null after a reload that did not report, so the next switch reloads anyway.
  let inForce = gatewayYaml(ROWS[0], sinks);
  const switchTo = async (row) => {
    const extraYaml = gatewayYaml(row, sinks);
    if (extraYaml === inForce) return false;
    writeFileSync(
      g.config,
      chaingateConfig({ dir, port: g.port, upstreamPort: upstream.port, chainId: FIXED_UPSTREAM_CHAIN_ID, extraYaml }),
    );
    inForce = null;
    const from = statSync(g.proc.logPath).size;
    process.kill(g.pid, 'SIGHUP');
    await reloadLogged(g.proc.logPath, from);
    inForce = extraYaml;
    return true;
  };
  return { ...g, switchTo };
}

/** How long a reload may take to be logged, in ms. */
const RELOAD_WAIT_MS = 15_000;

/** Resolves once the gateway's log, past byte `from`, says the reload applied; rejects when it says it was refused. */
async function reloadLogged(logPath, from) {
  const until = Date.now() + RELOAD_WAIT_MS;
  while (Date.now() < until) {
    const text = readFileSync(logPath).subarray(from).toString();
    const refusal = /^.*"msg":"config reload refused.*$/m.exec(text);
    if (refusal) throw new Error(`the reload was refused: ${refusal[0]}`);
    if (text.includes('"msg":"config reloaded"')) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no reload logged within ${RELOAD_WAIT_MS} ms`);
}

/** Rounds run so far: each round's first turn starts at the next row. */
let roundsRun = 0;

export async function run(sectionCtx) {
  mkdirSync(sectionCtx.tmpdir, { recursive: true });
  const bodies = forwardedBodies(sectionCtx.settings.connections);
  const script = writePostScript(sectionCtx.tmpdir, bodies, 'tracing.lua');
  const ctx = { ...sectionCtx, body: bodies[0], script };
  const firstTurn = roundsRun++;
  let upstream;
  let gateway;
  // A sink per traced row, so that each counts the spans of its own row.
  const sinks = new Map();
  try {
    upstream = await startFixedUpstream({ name: 'tracing-upstream', core: ctx.settings.loadCore });
    for (const row of ROWS) if (row.ratio !== null) sinks.set(row.id, await startSink());
    gateway = await startSwitchedGateway(upstream, sinks, ctx);
  } catch (err) {
    await stopAll(gateway, sinks, upstream, ctx);
    return ROWS.map(({ id, label }) =>
      notRun({ id, label, reason: `upstream, sink or gateway did not start: ${err.message}`, error: true }),
    );
  }
  let runs;
  try {
    const measureSlice = async (row, sliceCtx, label) => {
      let switched;
      try {
        switched = await gateway.switchTo(row);
      } catch (err) {
        return { id: row.id, label, errors: [`the reload to this row failed: ${err.message}`], warnings: [] };
      }
      // A slice after a switch warms the new mode up first (its tracer, the code paths it takes).
      const settings = switched ? { ...sliceCtx.settings, warmupSeconds: Math.max(1, sliceCtx.settings.warmupSeconds) } : sliceCtx.settings;
      return measure({ id: row.id, label, url: gateway.url, pid: gateway.pid, upstreamPid: upstream.pid, ctx: { ...sliceCtx, settings } });
    };
    runs = await measureInSlices({ rows: ROWS, firstTurn, ctx, measureSlice });
  } finally {
    // The graceful stop flushes the spans still buffered: what each sink got by then is its row's.
    await stopAll(gateway, sinks, upstream, ctx);
  }
  return ROWS.map((row) => {
    const r = runs.get(row.id);
    r.spansReceived = sinks.get(row.id)?.bodies() ?? 0;
    if (row.ratio !== null && r.spansReceived === 0) r.warnings.push('the sink received no spans');
    r.roundFields = ROUND_FIELDS;
    return r;
  });
}

async function stopAll(gateway, sinks, upstream, ctx) {
  await gateway?.stop(stopGraceMs(ctx));
  for (const s of sinks.values()) await s.stop();
  await upstream?.stop();
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
    check(
      'CPU per call tracing off, second row / first (the noise)',
      [by['off-again'], by.off],
      (a, o) => a.cpuUsPerRequest / o.cpuUsPerRequest,
      'reported',
    ),
    check('OTLP bodies the sink received at 1 %', [by['one-percent']], (p) => p.spansReceived, 'reported'),
  ];
}
