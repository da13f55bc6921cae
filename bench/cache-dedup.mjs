// Section: the response cache and in-flight de-duplication, in front of anvil. A cache hit (the cache
// filled to 90 % first, for its RSS) against the same call forwarded: two gateways side by side, cache on
// and off. Then bursts of identical and of distinct reads at one instant, with the calls that reached
// the node counted from anvil's own log. See bench/README.md (cache-dedup).
import { mkdirSync } from 'node:fs';
import { anvilCallCounter } from './lib/anvil-calls.mjs';
import { measureBurstPair, measureGateway, prepareChain } from './lib/cache-measure.mjs';
import { chaingateMain } from './lib/chaingate.mjs';
import { readBurstSettings } from './lib/dedup-burst.mjs';
import { notRun } from './lib/measure.mjs';
import { registerRunTable } from './lib/report.mjs';
import { checkerFor } from './lib/checks.mjs';
import { inTurn } from './lib/rounds.mjs';
import { anvilPath, startAnvil } from './lib/upstreams.mjs';
import { writePostScript } from './lib/wrk.mjs';

export const id = 'cache-dedup';
export const title = 'Response cache hits and in-flight de-duplication (public path, anvil)';
/** Tools this section cannot run without (run.mjs skips it when one is missing). */
export const needs = ['wrk'];

/** cache.max_bytes of the cached gateway: the default (src/config/defaults.ts), written out so the RSS target follows it. */
const CACHE_MAX_BYTES = 67_108_864;
const CACHE_MAX_MB = CACHE_MAX_BYTES / 1_048_576;
/** The share of max_bytes filled before the hits are measured (the hit blocks take the rest, and less). */
const FILL_SHARE = 0.9;

/** Targets of this section; a check whose inputs errored or were skipped reads ERROR/SKIP, never PASS. */
const TARGETS = {
  rpsRatio: 2, // req/s, cache hit / forwarded, at least (issue 30)
  cpuRatio: 0.5, // gateway CPU per request, cache hit / forwarded, below
  rssMb: 100 + CACHE_MAX_MB, // the cached gateway's RSS: the upstream road's 100 MB (http-proxy) plus its cache, at most
  hitCalls: 0.01, // upstream calls per request with the cache on, at most: hits are not forwarded
  forwardedCalls: 0.99, // upstream calls per request of the forwarded rows, at least: the baselines forward
  identicalCalls: 2, // upstream calls per burst of identical reads, at most (in-flight sharing)
};

const fixed = (digits) => (v) => (v == null ? '–' : v.toFixed(digits));
const ms = (v) => (v == null ? '–' : v < 10 ? v.toFixed(2) : v.toFixed(1));
const isBurst = (r) => r.id.startsWith('burst-');

function notes(r) {
  if (r.skipped) return `skipped: ${r.skipped}`;
  const out = r.errors.map((e) => `ERROR: ${e.split('\n')[0]}`);
  if (r.rounds) {
    out.unshift(
      isBurst(r)
        ? `median of calls/burst ${r.rounds.map((x) => fixed(1)(x.upstreamCallsPerBurst)).join(', ')}`
        : `median of CPU µs/req ${r.rounds.map((x) => fixed(1)(x.cpuUsPerRequest)).join(', ')}`,
    );
  }
  if (r.cacheFilledMb != null)
    out.push(
      `cache filled with ${r.cacheFilledMb.toFixed(1)} MB first (RSS ${r.rssBeforeFillMb.toFixed(0)} → ${r.rssAfterFillMb.toFixed(0)} MB)`,
    );
  if (r.upstreamCallsMax != null) out.push(`most in one burst ${r.upstreamCallsMax}, writes spread over ${ms(r.writeSpreadMs)} ms`);
  if (r.warnings?.length) out.push(`warnings: ${r.warnings.join(', ')}`);
  return out.join('; ');
}

registerRunTable(id, {
  head: ['target', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'max RSS MB', 'upstream calls', 'notes'],
  row: (r) => [
    r.label,
    r.rps == null ? '–' : Math.round(r.rps).toLocaleString('en-US'),
    ms(r.p50Ms),
    ms(r.p99Ms),
    fixed(1)(r.cpuUsPerRequest),
    fixed(1)(r.maxRssMb),
    isBurst(r)
      ? r.upstreamCallsPerBurst == null
        ? '–'
        : `${fixed(1)(r.upstreamCallsPerBurst)}/burst`
      : r.upstreamCallsPerRequest == null
        ? '–'
        : `${fixed(3)(r.upstreamCallsPerRequest)}/req`,
    notes(r),
  ],
  rightAligned: new Set([1, 2, 3, 4, 5, 6]),
});

const usable = (r) => r && !r.skipped && r.errors.length === 0 && r[r.rankBy] != null;
const check = checkerFor(usable);

/** The section's targets, judged on its runs (merged across rounds by the caller). */
export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  const [hit, forwarded, off, identical, distinct] = [
    'cache-hit',
    'forwarded',
    'forwarded-cache-off',
    'burst-identical',
    'burst-distinct',
  ].map((k) => by[k]);
  const n = distinct?.burstSize ?? identical?.burstSize;
  return [
    // The two rows run back to back, taking turns at going first: each ratio pairs one round's two runs.
    check(
      'req/s cache hit / forwarded (same config)',
      [hit, forwarded],
      (h, f) => h.rps / f.rps,
      `≥ ${TARGETS.rpsRatio}`,
      (v) => v >= TARGETS.rpsRatio,
    ),
    check(
      'gateway CPU per request, cache hit / forwarded (same config)',
      [hit, forwarded],
      (h, f) => h.cpuUsPerRequest / f.cpuUsPerRequest,
      `< ${TARGETS.cpuRatio}`,
      (v) => v < TARGETS.cpuRatio,
    ),
    check(
      `cached gateway max RSS (MB), cache ${FILL_SHARE * 100} % full, median of the rounds`,
      [hit],
      (h) => h.maxRssMb,
      `≤ ${TARGETS.rssMb} (100 + cache ${CACHE_MAX_MB})`,
      (v) => v <= TARGETS.rssMb,
    ),
    // The two below make the ratio mean what it says: hits never reach the node, the baseline always does.
    check(
      'upstream calls per request, cache on',
      [hit],
      (h) => h.upstreamCallsPerRequest,
      `≤ ${TARGETS.hitCalls}`,
      (v) => v <= TARGETS.hitCalls,
    ),
    check(
      'upstream calls per request, cache on, blocks not final',
      [forwarded],
      (f) => f.upstreamCallsPerRequest,
      `≥ ${TARGETS.forwardedCalls}`,
      (v) => v >= TARGETS.forwardedCalls,
    ),
    check(
      'upstream calls per request, cache off',
      [off],
      (f) => f.upstreamCallsPerRequest,
      `≥ ${TARGETS.forwardedCalls}`,
      (v) => v >= TARGETS.forwardedCalls,
    ),
    check(
      `upstream calls per burst of ${n ?? 'N'} identical reads`,
      [identical],
      (s) => s.upstreamCallsPerBurst,
      `≤ ${TARGETS.identicalCalls}`,
      (v) => v <= TARGETS.identicalCalls,
    ),
    // Distinct reads cannot be shared: all must arrive, which also proves the log counts every call.
    check(
      `upstream calls per burst of ${n ?? 'N'} distinct reads`,
      [distinct],
      (d) => d.upstreamCallsPerBurst,
      `= ${n ?? 'N'}`,
      (v) => v === n,
    ),
  ];
}

export async function run(ctx) {
  const { settings } = ctx;
  const read = readBurstSettings({ quick: settings.quick });
  const n = read.settings?.size ?? 'N';
  const gatewayRows = [
    ['cache-hit', 'chaingate, cache on: eth_getBlockByHash of final blocks (hits)'],
    ['forwarded', 'chaingate, cache on: eth_getBlockByHash of blocks not final yet (forwarded)'],
    ['forwarded-cache-off', "chaingate, cache off (max_bytes 0): the final blocks' calls, forwarded"],
  ];
  const burstRows = [
    ['burst-identical', `burst of ${n} identical eth_getBalance(addr, latest)`],
    ['burst-distinct', `burst of ${n} eth_getBalance(latest) of ${n} addresses`],
  ];
  const cannotRun = (reason, error = true) => [
    ...gatewayRows.map(([id, label]) => notRun({ id, label, reason, error })),
    ...burstRows.map(([id, label]) => ({ ...notRun({ id, label, reason, error }), burstSize: read.settings?.size })),
  ];
  if (read.errors) return cannotRun(`bad settings: ${read.errors.join('; ')}`);
  if (!anvilPath()) return cannotRun('anvil not found (npm install, or BENCH_ANVIL=path)', false);
  if (!chaingateMain()) return cannotRun('dist/main.js is missing: run npm run build');
  mkdirSync(ctx.tmpdir, { recursive: true });

  // Not --quiet, whatever BENCH_ANVIL_QUIET says: anvil's log is the call counter.
  let anvil;
  try {
    anvil = await startAnvil({ name: 'anvil-cache-dedup', core: settings.loadCore });
  } catch (err) {
    return cannotRun(`anvil did not start: ${err.message}`);
  }
  try {
    // More blocks than wrk has connections (twice over), asked for in turn, so identical calls are seldom in flight together.
    let blocks;
    let recent;
    let fill;
    try {
      ({ blocks, recent, fill } = await prepareChain({
        port: anvil.port,
        hashed: Math.max(128, 2 * settings.connections),
        fillBytes: FILL_SHARE * CACHE_MAX_BYTES,
      }));
    } catch (err) {
      return cannotRun(`preparing anvil's chain: ${err.message}`);
    }
    const wrkCtx = {
      ...ctx,
      body: blocks[0].body,
      script: writePostScript(
        ctx.tmpdir,
        blocks.map((b) => b.body),
        'cache-dedup.lua',
      ),
    };
    const counter = anvilCallCounter(anvil.proc.logPath, 'eth_getBlockByHash');
    const common = { anvil, counter, blocks, ctx: wrkCtx };
    const recentCtx = {
      ...ctx,
      body: recent[0].body,
      script: writePostScript(
        ctx.tmpdir,
        recent.map((b) => b.body),
        'cache-dedup-recent.lua',
      ),
    };
    // Metrics on, as by default, on a port of their own: 9464 may be another bench's on a shared machine.
    const cacheOn = `cache: { max_bytes: ${CACHE_MAX_BYTES} }\nmetrics: { port: 0 }\n`;
    const [hitRow, forwardedRow, offRow] = gatewayRows;
    // Hit and forwarded back to back, taking turns at going first round by round (lib/rounds.mjs): their
    // ratios are judged. The cache-off row's own figures are, so it runs after them.
    const pair = [
      () => measureGateway({ ...common, id: hitRow[0], label: hitRow[1], extraYaml: cacheOn, fill }),
      () => measureGateway({ ...common, blocks: recent, ctx: recentCtx, id: forwardedRow[0], label: forwardedRow[1], extraYaml: cacheOn }),
    ];
    const measured = [];
    for (const measureRow of inTurn(pair, ctx.round)) measured.push(await measureRow());
    const runs = [
      ...gatewayRows.slice(0, 2).map(([rowId]) => measured.find((r) => r.id === rowId)),
      await measureGateway({ ...common, id: offRow[0], label: offRow[1], extraYaml: 'cache: { max_bytes: 0 }\nmetrics: { port: 0 }\n' }),
    ];
    runs.push(...(await measureBurstPair({ rows: burstRows, anvil, burst: read.settings, cacheMaxBytes: CACHE_MAX_BYTES, ctx })));
    return runs;
  } finally {
    await anvil.stop();
  }
}
