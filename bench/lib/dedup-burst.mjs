// The de-dup burst: N JSON-RPC requests written as nearly at one instant as a client can, over N
// keep-alive connections opened beforehand, repeated, with the calls that reached the node counted per burst. Raw sockets and request
// bytes made in advance keep the writes of one burst within a few ms (node:http's client would spread
// them over several times that), so what the gateway shares is not lost to the client's own pace.
import { connect } from 'node:net';
import { startBoxLoad } from './box-load.mjs';
import { percentile } from './fanout-measure.mjs';
import { NOISY_PERCENT, waitForQuiet } from './measure.mjs';
import { CLK_TCK, processTree, startSampling } from './proc-stats.mjs';
import { int } from './settings.mjs';

/** Bursts before the counted ones, not counted: connections and the gateway's code paths warm up. */
const WARMUP_BURSTS = 5;
/** Pause after a burst's last answer: the node's log catches up and the next burst starts from rest. */
const SETTLE_MS = 100;
/**
 * Longest a burst may take to be answered in full before the run is an error: past the gateway's
 * upstream timeout (30 s), so that whatever the gateway answers in the end is seen.
 */
const BURST_TIMEOUT_MS = 35_000;
/** A burst slower than this is named in the run's warnings, with the node's calls by then (where it waited). */
const SLOW_BURST_MS = 1_000;
/** Figures kept for each round of a merged run (see lib/rounds.mjs), which the checks pair round by round. */
export const BURST_ROUND_FIELDS = ['upstreamCallsPerBurst', 'cpuUsPerRequest', 'writeSpreadMs'];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** `{ settings }` or `{ errors }`: the burst's knobs (BENCH_DEDUP_BURST, BENCH_DEDUP_BURSTS). `quick` is BENCH_QUICK. */
export function readBurstSettings({ quick }) {
  const errors = [];
  const settings = {
    size: int('BENCH_DEDUP_BURST', 200, 2, 2_000, errors),
    bursts: int('BENCH_DEDUP_BURSTS', quick ? 5 : 20, 1, 500, errors),
  };
  return errors.length ? { errors } : { settings };
}

/** The byte offset where the HTTP answer at the start of `buf` ends, or -1 while it is incomplete. */
function answerEnd(buf) {
  const head = buf.indexOf('\r\n\r\n');
  if (head < 0) return -1;
  const m = /\r\ncontent-length:\s*(\d+)/i.exec(buf.subarray(0, head).toString('latin1'));
  if (!m) throw new Error(`an answer without Content-Length: ${buf.subarray(0, head).toString('latin1')}`);
  const end = head + 4 + Number(m[1]);
  return buf.length >= end ? end : -1;
}

/**
 * One keep-alive connection to 127.0.0.1:`port`; `send(bytes)` writes one request and resolves
 * `{ status, body, at }` (`at`: performance.now() when its last byte arrived). One request at a time.
 */
function openConnection(port) {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    let buf = Buffer.alloc(0);
    let waiter = null;
    let closed = false;
    const fail = (err) => {
      waiter?.reject(err);
      waiter = null;
    };
    socket.on('data', (chunk) => {
      const at = performance.now();
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      let end;
      try {
        end = answerEnd(buf);
      } catch (err) {
        return fail(err);
      }
      if (end < 0 || !waiter) return;
      const text = buf.subarray(0, end).toString('utf8');
      buf = buf.subarray(end);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
      waiter.resolve({ status, body: text.slice(text.indexOf('\r\n\r\n') + 4), at });
      waiter = null;
    });
    socket.on('error', (err) => (waiter ? fail(err) : reject(err)));
    socket.on('close', () => {
      closed = true;
      fail(new Error('the gateway closed a connection'));
    });
    socket.once('connect', () =>
      resolve({
        send(bytes) {
          if (closed) return Promise.reject(new Error('the gateway closed a connection'));
          const answered = new Promise((res, rej) => (waiter = { resolve: res, reject: rej }));
          socket.write(bytes);
          return answered;
        },
        close: () => socket.destroy(),
      }),
    );
  });
}

/** What is wrong with the answer to request `i` (JSON-RPC id i + 1), or null when it is `expected`. */
function wrongAnswer({ status, body }, i, expected) {
  if (status !== 200) return `HTTP ${status}: ${body.slice(0, 200)}`;
  let answer;
  try {
    answer = JSON.parse(body);
  } catch {
    return `not JSON: ${body.slice(0, 200)}`;
  }
  if (answer.id !== i + 1) return `id ${JSON.stringify(answer.id)} instead of ${i + 1}`;
  if (JSON.stringify(answer.result) !== JSON.stringify(expected))
    return `result ${body.slice(0, 200)} instead of ${JSON.stringify(expected)}`;
  return null;
}

/**
 * Sends `bursts` bursts of `bodies` (one per connection, request i with JSON-RPC id i + 1) to the
 * gateway at `url` (process tree `pid`), after WARMUP_BURSTS that are not counted. Checks every
 * answer against `expected[i]` (its own id included: shared answers must carry each caller's id), and
 * counts the node's calls per burst with `countCalls` (calls seen so far). The connections are opened
 * after the quiet wait: uWS closes a keep-alive connection idle for 10 s.
 */
export async function measureBursts({ id, label, url, pid, upstreamPid, bodies, expected, bursts, countCalls, ctx }) {
  const run = {
    id,
    label,
    url,
    errors: [],
    warnings: [],
    burstSize: bodies.length,
    bursts,
    rankBy: 'upstreamCallsPerBurst',
    roundFields: BURST_ROUND_FIELDS,
  };
  const { port, pathname } = new URL(url);
  const requests = bodies.map((body) =>
    Buffer.from(
      `POST ${pathname} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    ),
  );
  const ours = [...processTree(pid), ...(upstreamPid ? processTree(upstreamPid) : [])];
  run.quietWaitSeconds = await waitForQuiet(ours, ctx.settings.quietWaitSeconds, ctx.log);
  let conns = [];
  /** One burst: `{ completionMs, writeSpreadMs, upstreamCalls, callsWhenSlow }`; throws on a wrong or missing answer. */
  const burst = async (name) => {
    const before = countCalls();
    let callsWhenSlow = null;
    const slowTimer = setTimeout(() => (callsWhenSlow = countCalls() - before), SLOW_BURST_MS);
    let answered = 0;
    const t0 = performance.now();
    const answers = conns.map((c, i) =>
      c.send(requests[i]).then((a) => {
        answered++;
        return a;
      }),
    );
    const written = performance.now();
    let timer;
    const timeout = new Promise((_, rej) => {
      timer = setTimeout(() => {
        const waiting = conns.length - answered;
        rej(
          new Error(
            `${name}: ${waiting} of ${conns.length} answers missing after ${BURST_TIMEOUT_MS} ms; the node had seen ${countCalls() - before} calls`,
          ),
        );
      }, BURST_TIMEOUT_MS);
    });
    try {
      const got = await Promise.race([Promise.all(answers).catch((err) => Promise.reject(new Error(`${name}: ${err.message}`))), timeout]);
      const wrong = got.map((a, i) => wrongAnswer(a, i, expected[i])).filter(Boolean);
      if (wrong.length) throw new Error(`${name}: ${wrong.length} of ${got.length} answers wrong, first: ${wrong[0]}`);
      const completionMs = Math.max(...got.map((a) => a.at)) - t0;
      await sleep(SETTLE_MS);
      return { completionMs, writeSpreadMs: written - t0, upstreamCalls: countCalls() - before, callsWhenSlow };
    } finally {
      clearTimeout(timer);
      clearTimeout(slowTimer);
    }
  };
  try {
    const opened = await Promise.allSettled(requests.map(() => openConnection(Number(port))));
    conns = opened.filter((o) => o.status === 'fulfilled').map((o) => o.value);
    const refused = opened.find((o) => o.status === 'rejected');
    if (refused) throw new Error(`connecting: ${refused.reason.message}`);
    for (let b = 1; b <= WARMUP_BURSTS; b++) await burst(`warm-up burst ${b}`);

    ctx.log(`${label}: ${bursts} bursts of ${bodies.length}`);
    const boxLoad = startBoxLoad(CLK_TCK, ours);
    const sampling = startSampling(pid);
    const done = [];
    try {
      for (let b = 1; b <= bursts; b++) done.push(await burst(`burst ${b}`));
    } finally {
      const usage = sampling.stop();
      run.maxRssMb = usage.maxRssMb;
      run.cpuUsPerRequest = done.length ? (usage.cpuSeconds * 1e6) / (done.length * bodies.length) : null;
      Object.assign(run, boxLoad.stop());
    }
    const calls = done.map((d) => d.upstreamCalls);
    run.upstreamCallsPerBurst = calls.reduce((a, b) => a + b, 0) / calls.length;
    run.upstreamCallsMax = Math.max(...calls);
    run.upstreamCallsEachBurst = calls;
    run.completionMsEachBurst = done.map((d) => d.completionMs);
    run.p50Ms = percentile(run.completionMsEachBurst, 50);
    run.p99Ms = percentile(run.completionMsEachBurst, 99);
    run.writeSpreadMs = percentile(
      done.map((d) => d.writeSpreadMs),
      50,
    );
    done.forEach((d, i) => {
      if (d.completionMs > SLOW_BURST_MS)
        run.warnings.push(
          `burst ${i + 1} took ${Math.round(d.completionMs)} ms (the node had seen ${d.callsWhenSlow} calls after ${SLOW_BURST_MS} ms)`,
        );
    });
  } catch (err) {
    run.errors.push(err.message);
  } finally {
    for (const c of conns) c.close();
  }
  if (run.otherCpuPercent > NOISY_PERCENT) run.warnings.push(`others used ${Math.round(run.otherCpuPercent)}% of a core`);
  if (run.stealPercent > NOISY_PERCENT) run.warnings.push(`steal ${Math.round(run.stealPercent)}% of a core`);
  return run;
}
