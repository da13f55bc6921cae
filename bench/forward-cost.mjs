// Section: what one forwarded call costs chaingate against BENCH_BASELINE's build, the two measured back to
// back in every round in front of one fixed upstream, so a change to the forwarded call's road (such as the
// check that each answer carries the id the gateway sent) is judged by paired ratios, not by runs minutes
// apart. Without BENCH_BASELINE its rows are this build's alone and its checks are skipped. Beside them, what
// the id check's scan costs a large streamed answer, timed in this process. See bench/README.md (forward-cost).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { checkerFor, median, versusBaseline } from './lib/checks.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { measureGatewayRow } from './lib/gateway-run.mjs';
import { notRun } from './lib/measure.mjs';
import { inTurn } from './lib/rounds.mjs';
import { startFixedUpstream } from './lib/upstreams.mjs';
import { writePostScript } from './lib/wrk.mjs';

export const id = 'forward-cost';
export const title = 'Forwarded call against the baseline build (eth_getBalance, public path, fixed upstream)';
/** Tools this section cannot run without (run.mjs skips it when one is missing). */
export const needs = ['wrk'];

const TARGETS = {
  cpuBaseline: 1.02, // CPU per call chaingate / baseline at most: the id check's budget (issue 28, part 4)
  rpsBaseline: 0.95, // req/s chaingate / baseline at least: "the forwarded call's cost unchanged within 5 %"
};

/** Figures kept for each round of a merged run, which the checks pair round by round (lib/rounds.mjs). */
const ROUND_FIELDS = ['cpuUsPerRequest'];

/** The streamed answer the scan is timed on: eth_getLogs-shaped, 64 MiB, in the 64 KiB pieces a socket gives. */
const SCAN_MIB = 64;

/** A 64 MiB eth_getLogs answer (id first, as nodes write it) cut into 64 KiB pieces. */
function logsAnswerPieces() {
  const log = {
    address: `0x${'ab'.repeat(20)}`,
    topics: [`0x${'cd'.repeat(32)}`, `0x${'ef'.repeat(32)}`, `0x${'12'.repeat(32)}`],
    data: `0x${'34'.repeat(64)}`,
    blockNumber: '0x1234',
    transactionHash: `0x${'56'.repeat(32)}`,
    transactionIndex: '0x1',
    blockHash: `0x${'78'.repeat(32)}`,
    logIndex: '0x2',
    removed: false,
  };
  const one = JSON.stringify(log);
  const count = Math.ceil((SCAN_MIB * 1024 * 1024) / (one.length + 1));
  const body = Buffer.from(`{"jsonrpc":"2.0","id":1,"result":[${Array(count).fill(one).join(',')}]}`);
  const pieces = [];
  for (let i = 0; i < body.length; i += 65_536) pieces.push(body.subarray(i, i + 65_536));
  return { pieces, mib: body.length / (1024 * 1024) };
}

/**
 * ms per MiB the id rewriter takes over the streamed answer, with the id check (reading to the end) and
 * without it (stopping at the id, as before the check): medians of `rounds` passes each, taking turns.
 */
async function timeScan(rounds) {
  const { createIdRewriter } = await import(pathToFileURL(join(import.meta.dirname, '../dist/jsonrpc/id-rewrite.js')).href);
  const { pieces, mib } = logsAnswerPieces();
  const pass = (sent) => {
    const rewriter = createIdRewriter('"client-id"', sent);
    const started = process.hrtime.bigint();
    for (const piece of pieces) rewriter.push(piece);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    if (sent !== undefined && (!rewriter.closed || rewriter.invalid)) throw new Error('the scan did not accept the answer');
    return ms / mib;
  };
  const checked = [];
  const unchecked = [];
  for (let i = 0; i < rounds; i++) {
    checked.push(pass('1'));
    unchecked.push(pass(undefined));
  }
  return { checked: median(checked), unchecked: median(unchecked) };
}

export async function run(sectionCtx) {
  mkdirSync(sectionCtx.tmpdir, { recursive: true });
  const bodies = forwardedBodies(sectionCtx.settings.connections);
  const ctx = { ...sectionCtx, body: bodies[0], script: writePostScript(sectionCtx.tmpdir, bodies, 'forward-cost.lua') };
  const base = ctx.baseline;
  const rows = [
    { id: 'chaingate', label: 'chaingate (workers: 1) → fixed upstream', workers: 1 },
    ...(base ? [{ id: 'baseline', label: `chaingate @${base.ref} → fixed upstream`, main: base.main, workers: base.workers }] : []),
  ];
  const runs = [];
  let upstream;
  try {
    upstream = await startFixedUpstream({ name: 'forward-cost-upstream', core: ctx.settings.loadCore });
  } catch (err) {
    return rows.map(({ id, label }) => notRun({ id, label, reason: `upstream did not start: ${err.message}`, error: true }));
  }
  try {
    // The two take turns at going first, round by round (lib/rounds.mjs).
    for (const row of inTurn(rows, ctx.round)) runs.push(await measureGatewayRow({ ...row, upstream, roundFields: ROUND_FIELDS, ctx }));
  } finally {
    await upstream.stop();
  }
  ctx.log(`timing the id check's scan over a ${SCAN_MIB} MiB streamed answer`);
  const scan = await timeScan(5);
  runs.push({
    id: 'scan',
    label: `id rewriter over a ${SCAN_MIB} MiB streamed eth_getLogs answer (this process, ms/MiB)`,
    errors: [],
    warnings: [],
    rankBy: 'checkedMsPerMib',
    checkedMsPerMib: scan.checked,
    uncheckedMsPerMib: scan.unchecked,
    roundFields: ['checkedMsPerMib', 'uncheckedMsPerMib'],
  });
  return runs;
}

const usable = (r) => r && !r.skipped && r.errors.length === 0 && (r.rps != null || r.checkedMsPerMib != null);
const check = checkerFor(usable);

export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  return [
    ...versusBaseline(check, {
      what: 'chaingate / baseline, fixed upstream',
      run: by.chaingate,
      baseline: by.baseline,
      cpuAtMost: TARGETS.cpuBaseline,
      rpsAtLeast: TARGETS.rpsBaseline,
    }),
    check('id check over a streamed answer, ms per MiB', [by.scan], (s) => s.checkedMsPerMib, 'reported'),
    check('id rewriter without the check (stops at the id), ms per MiB', [by.scan], (s) => s.uncheckedMsPerMib, 'reported'),
  ];
}
