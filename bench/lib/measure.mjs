import { checkJsonRpcResult } from './net.mjs';
import { startBoxLoad } from './box-load.mjs';
import { CLK_TCK, involuntarySwitches, processTree, startSampling, treeCpuTicks } from './proc-stats.mjs';
import { runWrk } from './wrk.mjs';

/** Percent of one core taken by others during a run above which its figures are marked as disturbed. */
export const NOISY_PERCENT = 10;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits, up to `maxSeconds`, for a second in which other processes leave the machine alone (below
 * NOISY_PERCENT of a core), so that a neighbour's build or test run is not measured as our slowness.
 * Returns the seconds waited; the run goes ahead regardless and is marked when still disturbed.
 */
export async function waitForQuiet(ours, maxSeconds, log) {
  if (maxSeconds <= 0) return 0;
  const start = Date.now();
  for (let said = false; ; ) {
    const probe = startBoxLoad(CLK_TCK, ours);
    await sleep(1000);
    const { otherCpuPercent } = probe.stop();
    const waited = (Date.now() - start) / 1000;
    if (otherCpuPercent <= NOISY_PERCENT || waited >= maxSeconds) return Math.max(0, Math.round(waited - 1));
    if (!said) log(`  other processes use ${Math.round(otherCpuPercent)}% of a core; waiting up to ${maxSeconds}s for quiet`);
    said = true;
  }
}

/**
 * One measured run of wrk against `url`, whose server is the process tree of `pid`:
 * check the answer, warm up, measure while sampling the server's RSS and CPU, check the answer again.
 * Never throws: whatever went wrong is listed in `errors`, so the run is flagged and the bench goes on.
 * `upstreamPid` (the node behind a proxy) only keeps that node's CPU out of the box-load figure.
 * `servicePids` are the other servers behind it (a fleet's PostgreSQL and Redis): their CPU is kept out of
 * the box-load figure too, and their trees' CPU over the measured run, per request, is `serviceCpuUsPerRequest`.
 * `countUpstreamCalls`, when given, returns the calls the node has seen so far: read just before and
 * after the measured wrk run, it gives `upstreamCalls` and `upstreamCallsPerRequest`.
 * `checkAnswer` replaces the check of one answer before and after (default: HTTP 200 and a JSON-RPC
 * result); it resolves null when the answer is right, else a sentence. With `checkedScript`, ctx's wrk
 * script checks every answer itself (lib/wrk.mjs writeAnswerCheckScript), so answers that are not 2xx
 * are what is expected and any answer other than the script's is the error. `loadCore` is where wrk runs
 * (a core or a list; the settings' load core by default).
 */
export async function measure({
  id,
  label,
  url,
  pid,
  upstreamPid,
  servicePids = [],
  countUpstreamCalls,
  checkAnswer,
  checkedScript = false,
  loadCore,
  ctx,
}) {
  const { settings, body, script } = ctx;
  const run = { id, label, url, errors: [], warnings: [] };
  const wrkOptions = { url, script, connections: settings.connections, threads: settings.threads, core: loadCore ?? settings.loadCore };
  const check = checkAnswer ?? (() => checkJsonRpcResult(url, body));

  const before = await check();
  if (before) {
    run.errors.push(`wrong answer before the run: ${before}`);
    return run;
  }
  const ours = [pid, ...(upstreamPid ? [upstreamPid] : []), ...servicePids].flatMap((p) => processTree(p));
  const serviceTicks = () => servicePids.reduce((sum, p) => sum + treeCpuTicks(p), 0);
  run.quietWaitSeconds = await waitForQuiet(ours, settings.quietWaitSeconds, ctx.log);
  ctx.log(`${label}: warm-up ${settings.warmupSeconds}s, then ${settings.seconds}s measured`);
  try {
    if (settings.warmupSeconds > 0) await runWrk({ ...wrkOptions, name: `wrk warm-up ${id}`, seconds: settings.warmupSeconds });
    const boxLoad = startBoxLoad(CLK_TCK, ours);
    const sampling = startSampling(pid);
    const callsBefore = countUpstreamCalls?.();
    const switchesBefore = involuntarySwitches(pid);
    const serviceBefore = serviceTicks();
    let report;
    try {
      report = await runWrk({ ...wrkOptions, name: `wrk ${id}`, seconds: settings.seconds });
    } finally {
      if (countUpstreamCalls) run.upstreamCalls = countUpstreamCalls() - callsBefore;
      run.involuntarySwitches = involuntarySwitches(pid) - switchesBefore;
      if (servicePids.length) run.serviceCpuSeconds = (serviceTicks() - serviceBefore) / CLK_TCK;
      const usage = sampling.stop();
      run.maxRssMb = usage.maxRssMb;
      run.cpuSeconds = usage.cpuSeconds;
      Object.assign(run, boxLoad.stop());
    }
    Object.assign(run, report);
    run.cpuUsPerRequest = report.requests > 0 ? (run.cpuSeconds * 1e6) / report.requests : null;
    if (servicePids.length) run.serviceCpuUsPerRequest = report.requests > 0 ? (run.serviceCpuSeconds * 1e6) / report.requests : null;
    if (countUpstreamCalls) run.upstreamCallsPerRequest = report.requests > 0 ? run.upstreamCalls / report.requests : null;
  } catch (err) {
    run.errors.push(err.message);
    return run;
  }

  // wrk counts error answers and broken connections as requests in its req/s: they void the figure.
  if (checkedScript) run.errors.push(...answerErrors(run));
  else if (run.non2xx > 0) run.errors.push(`${run.non2xx} non-2xx/3xx responses`);
  const se = run.socketErrors;
  if (se.connect + se.read + se.write + se.timeout > 0) {
    run.errors.push(`socket errors: connect ${se.connect}, read ${se.read}, write ${se.write}, timeout ${se.timeout}`);
  }
  const after = await check();
  if (after) run.errors.push(`wrong answer after the run: ${after}`);
  // Not errors (the answers were right), but the figures of such a run are not comparable.
  if (run.otherCpuPercent > NOISY_PERCENT) run.warnings.push(`others used ${Math.round(run.otherCpuPercent)}% of a core`);
  if (run.stealPercent > NOISY_PERCENT) run.warnings.push(`steal ${Math.round(run.stealPercent)}% of a core`);
  return run;
}

/** What is wrong with the answers a checking wrk script saw over a run: each one counted, none unexpected. */
function answerErrors(run) {
  const a = run.answers;
  if (!a) return ["wrk's script did not report its answers"];
  const errors = [];
  if (a.otherStatus > 0) errors.push(`${a.otherStatus} answers with a status other than ${a.status} (the first: ${a.firstOtherStatus})`);
  if (a.otherBody > 0) errors.push(`${a.otherBody} answers with status ${a.status} and another body`);
  if (a.counted < run.requests) errors.push(`${run.requests - a.counted} of ${run.requests} answers not checked`);
  return errors;
}

/** A run that did not take place, with the reason (a tool missing, a server that did not start). */
export function notRun({ id, label, reason, error = false }) {
  return error ? { id, label, errors: [reason], warnings: [] } : { id, label, errors: [], warnings: [], skipped: reason };
}
