// One measured fan-out run: a fresh fake node, the server under test in front of it, N subscribers in
// separate processes, then blocks emitted at a fixed pace while the server's CPU is counted and every
// subscriber's receipts are checked. See bench/README.md (ws-fanout) for the method.
import { join } from 'node:path';
import { startBoxLoad } from './box-load.mjs';
import { collectEverywhere, INSPECT_ARG } from './fanout-gc.mjs';
import { startBarePubsub, startChaingateWs, startFakeNode, startSubscriberProcess } from './fanout-servers.mjs';
import { NOISY_PERCENT, waitForQuiet } from './measure.mjs';
import { CLK_TCK, cpuTicks, processTree, rssKb } from './proc-stats.mjs';
import { HAS_SCHEDSTAT, treeCpuNs } from './task-clock.mjs';

/** Pause after the subscribers are in, before the first block. */
const SETTLE_MS = 1_000;
/**
 * Youngest a server may be when its garbage is collected and its RSS without subscribers read: past
 * its start, before its memory reducer may run (its first check is at ~8 s).
 */
const RSS_BEFORE_AGE_MS = 10_000;
/** Wait after the collection before the RSS is read: V8 returns the freed pages from a background thread. */
const AFTER_COLLECTION_MS = 2_000;
/**
 * How long after the last subscriber subscribed, with no notification sent yet, the RSS of the
 * subscribed server is read: what a reconnect storm leaves resident until traffic makes V8 collect.
 */
const RSS_SUBSCRIBED_AFTER_MS = 15_000;
/** Longest wait for the server's upstream subscription once the subscribers are in. */
const UPSTREAM_WAIT_MS = 10_000;
/** Longest wait, after the last emit, for every subscriber to have every block. */
const DELIVERY_WAIT_MS = 10_000;
/** Longest time the subscribers may take to connect and subscribe. */
const CONNECT_TIMEOUT_MS = 120_000;
/** Handshakes in flight per subscriber process (below uWS's listen backlog of 512 with 4 processes). */
const CONNECT_CONCURRENCY = 100;

/** Figures kept for each round of a merged run (see lib/rounds.mjs), which the checks pair round by round. */
export const ROUND_FIELDS = [
  'cpuMsPerNotification',
  'cpuMsPerNotificationTicks',
  'rssBytesPerSubscriber',
  'rssBeforeMb',
  'rssSubscribedMb',
  'rssIdleMb',
  'upstreamSubscriptions',
  'p50Ms',
  'p99Ms',
];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const treeTicks = (pid) => processTree(pid).reduce((sum, p) => sum + cpuTicks(p), 0);
const treeRssKb = (pid) => processTree(pid).reduce((sum, p) => sum + rssKb(p), 0);

/**
 * The server's RSS without subscribers, from a known floor: once it is RSS_BEFORE_AGE_MS old, every
 * isolate (main thread and workers) makes a full, memory-reducing collection (fanout-gc.mjs), and the
 * RSS is read AFTER_COLLECTION_MS later. Whether V8's memory reducer had returned the start-up garbage
 * by then (with worker threads, up to ~40 MB, at one of its checks 8 s apart, or never when a collection
 * at start disarmed it) would otherwise decide the figure: garbage still there is collected by the burst
 * of upgrades and counts against the subscribers as a negative. `startedAt` is its start on
 * performance.now(). Resolves `{ kb, isolates }`.
 */
async function collectedRssKb(server, startedAt) {
  await sleep(startedAt + RSS_BEFORE_AGE_MS - performance.now());
  const isolates = await collectEverywhere(() => server.proc.output());
  await sleep(AFTER_COLLECTION_MS);
  return { kb: treeRssKb(server.pid), isolates };
}

/** Nearest-rank percentile of `values` (unsorted), p in (0, 100]. */
export function percentile(values, p) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** The subscriber processes' reports as one: per block, receipts summed, first and last receipt over all. */
function mergeReports(reports) {
  const blocks = [];
  const problems = {};
  const closeReasons = {};
  let subscribers = 0;
  for (const r of reports) {
    subscribers += r.subscribers;
    r.blocks.forEach((b, i) => {
      const m = (blocks[i] ??= { received: 0, extra: 0, firstAt: null, lastAt: null });
      m.received += b.received;
      m.extra += b.extra;
      if (b.firstAt !== null) m.firstAt = m.firstAt === null ? b.firstAt : Math.min(m.firstAt, b.firstAt);
      if (b.lastAt !== null) m.lastAt = m.lastAt === null ? b.lastAt : Math.max(m.lastAt, b.lastAt);
    });
    for (const [k, v] of Object.entries(r.problems)) problems[k] = (problems[k] ?? 0) + v;
    for (const [k, v] of Object.entries(r.closeReasons)) closeReasons[k] = (closeReasons[k] ?? 0) + v;
  }
  return { subscribers, blocks, problems, closeReasons };
}

/** Polls the subscriber processes until the first `upTo` blocks reached all `n` subscribers, or `timeoutMs`. */
async function waitForDelivery(clients, upTo, n, timeoutMs) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const merged = mergeReports(await Promise.all(clients.map((c) => c.report())));
    const done = Array.from({ length: upTo }, (_, i) => merged.blocks[i]?.received ?? 0).every((r) => r >= n);
    if (done || performance.now() > deadline) return merged;
    await sleep(100);
  }
}

/** Emits `count` blocks, the k-th at `intervalMs`·k after the first; resolves with their emit records. */
async function emitBlocks(node, count, intervalMs) {
  const emits = [];
  const t0 = performance.now();
  for (let k = 0; k < count; k++) {
    const wait = t0 + k * intervalMs - performance.now();
    if (wait > 0) await sleep(wait);
    emits.push(await node.emit());
  }
  return emits;
}

/** Every subscriber got every emitted block exactly once, in order, on its own subscription; else what went wrong. */
function deliveryErrors(merged, emitted, n) {
  const errors = [];
  if (merged.subscribers !== n) errors.push(`${merged.subscribers} of ${n} subscribers were subscribed`);
  const missing = [];
  const duplicated = [];
  for (let i = 0; i < emitted; i++) {
    const b = merged.blocks[i] ?? { received: 0, extra: 0 };
    if (b.received < n) missing.push(`block ${i + 1}: ${n - b.received}`);
    if (b.extra > 0) duplicated.push(`block ${i + 1}: ${b.extra}`);
  }
  if (merged.blocks.length > emitted) errors.push(`subscribers got ${merged.blocks.length - emitted} block(s) never emitted`);
  if (missing.length) errors.push(`subscribers missing blocks (${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', ...' : ''})`);
  if (duplicated.length) errors.push(`duplicate notifications (${duplicated.slice(0, 5).join(', ')})`);
  for (const [k, v] of Object.entries(merged.problems)) if (v > 0) errors.push(`${k}: ${v}`);
  const reasons = Object.entries(merged.closeReasons);
  if (reasons.length) errors.push(`sockets closed during the run: ${reasons.map(([r, c]) => `${c}× ${r}`).join(', ')}`);
  return errors;
}

async function startServer({ kind, id, workers, core, node, ctx, fanout }) {
  // Every server runs with the inspector, for the collection before its RSS without subscribers is read.
  if (kind === 'bare') {
    const s = await startBarePubsub({ name: `${id}`, nodePort: node.port, core, nodeArgs: [INSPECT_ARG] });
    return { ...s, url: `ws://127.0.0.1:${s.port}/` };
  }
  const nodeArgs = [
    INSPECT_ARG,
    ...(fanout.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', fanout.cpuProfDir, '--cpu-prof-name', `${id}-${Date.now()}.cpuprofile`] : []),
  ];
  const main = kind.startsWith('baseline') ? ctx.baseline.main : undefined;
  return startChaingateWs({ name: `${id}`, dir: join(ctx.tmpdir, id), nodePort: node.port, core, workers, nodeArgs, main });
}

/**
 * Measures one server (`kind` 'bare', 'chaingate', 'chaingate-auto', or 'baseline' and 'baseline-auto',
 * BENCH_BASELINE's build), on `core` (a core or a list) with `workers` worker threads (chaingate; null:
 * not configured, 'auto': the default, one per core the process may use), fanning
 * newHeads out to `n` subscribers. Never throws: what went wrong is listed in `errors`, which voids the
 * run's figures.
 */
export async function measureFanout({ id, label, kind, workers, core, n, ctx, fanout }) {
  const { settings } = ctx;
  const run = {
    id,
    label,
    server: kind,
    workers,
    subscribers: n,
    rankBy: 'cpuMsPerNotification',
    roundFields: ROUND_FIELDS,
    errors: [],
    warnings: [],
  };
  const started = [];
  try {
    const node = await startFakeNode({ name: `${id} fake node`, core: settings.loadCore });
    started.push(node);
    const server = await startServer({ kind, id, workers, core, node, ctx, fanout });
    const serverStartedAt = performance.now();
    started.push(server);

    const processes = Math.ceil(n / fanout.perProcess);
    const clients = [];
    for (let k = 0; k < processes; k++) {
      const c = await startSubscriberProcess({ name: `${id} subscribers ${k + 1}`, core: settings.loadCore });
      started.push(c);
      clients.push(c);
    }
    const before = await collectedRssKb(server, serverStartedAt);
    const rssBeforeKb = before.kb;
    run.isolatesCollected = before.isolates;
    const base = (await node.stats()).head;
    ctx.log(`${label}: ${n} subscribers from ${processes} processes`);
    // Each process connects from its own loopback address, so no one address runs short of ports.
    const connects = await Promise.all(
      clients.map((c, k) => {
        const count = Math.floor(n / processes) + (k < n % processes ? 1 : 0);
        return c.connect({
          url: server.url,
          count,
          localAddress: `127.0.0.${2 + k}`,
          base,
          concurrency: CONNECT_CONCURRENCY,
          timeoutMs: CONNECT_TIMEOUT_MS,
        });
      }),
    );
    const subscribedAt = performance.now();
    run.connectMs = Math.max(...connects.map((c) => c.ms));
    const failures = connects.flatMap((c) => c.failures);
    const failed = connects.reduce((s, c) => s + c.failed, 0);
    if (failed > 0) throw new Error(`${failed} of ${n} subscribers failed to subscribe, e.g. ${failures.slice(0, 3).join('; ')}`);

    for (const deadline = performance.now() + UPSTREAM_WAIT_MS; (await node.stats()).subscriptionsOpen < 1; await sleep(50)) {
      if (performance.now() > deadline)
        throw new Error(`no upstream subscription at the node ${UPSTREAM_WAIT_MS} ms after ${n} clients subscribed`);
    }
    // Idle subscribers' RSS: read before any notification, as long after the last subscribe as a client
    // reconnecting after a deploy would wait for its first head.
    await sleep(subscribedAt + RSS_SUBSCRIBED_AFTER_MS - performance.now());
    const rssSubscribedKb = treeRssKb(server.pid);
    await sleep(SETTLE_MS);

    // Warm-up blocks: the server's fan-out path runs (and is compiled) before anything is counted.
    const warmups = await emitBlocks(node, fanout.warmupBlocks, fanout.intervalMs);
    if (warmups.length) await waitForDelivery(clients, warmups.length, n, DELIVERY_WAIT_MS);

    const ours = [server.pid, node.pid, ...clients.map((c) => c.pid)];
    run.quietWaitSeconds = await waitForQuiet(ours, settings.quietWaitSeconds, ctx.log);
    const boxLoad = startBoxLoad(CLK_TCK, ours);

    // Idle baseline: the server's CPU with n subscribed sockets and no notification, as long as the emits take.
    const idleMs = fanout.blocks * fanout.intervalMs;
    ctx.log(`${label}: ${idleMs / 1000}s idle, then ${fanout.blocks} blocks every ${fanout.intervalMs} ms`);
    const cpuAt = () => ({
      at: performance.now(),
      ms: { ticks: (treeTicks(server.pid) * 1000) / CLK_TCK, schedstat: HAS_SCHEDSTAT ? treeCpuNs(server.pid) / 1e6 : null },
      clientMs: (clients.reduce((sum, c) => sum + cpuTicks(c.pid), 0) * 1000) / CLK_TCK,
    });
    const idle0 = cpuAt();
    await sleep(idleMs);
    const idle1 = cpuAt();
    const rssIdleKb = treeRssKb(server.pid);

    const busy0 = cpuAt();
    const emits = await emitBlocks(node, fanout.blocks, fanout.intervalMs);
    const emitted = warmups.length + emits.length;
    const merged = await waitForDelivery(clients, emitted, n, DELIVERY_WAIT_MS);
    const busy1 = cpuAt();
    Object.assign(run, boxLoad.stop());

    // CPU of the fan-out: the busy window's, less what the same server spends idle over as long.
    const busyMs = busy1.at - busy0.at;
    const perNotification = (clock) => {
      if (busy1.ms[clock] === null) return null;
      const idlePerMs = (idle1.ms[clock] - idle0.ms[clock]) / (idle1.at - idle0.at);
      return Math.max(0, busy1.ms[clock] - busy0.ms[clock] - idlePerMs * busyMs) / fanout.blocks;
    };
    run.cpuMsPerNotificationTicks = perNotification('ticks');
    run.cpuMsPerNotificationSchedstat = perNotification('schedstat');
    run.cpuClock = HAS_SCHEDSTAT ? 'schedstat' : 'utime+stime';
    run.cpuMsPerNotification = HAS_SCHEDSTAT ? run.cpuMsPerNotificationSchedstat : run.cpuMsPerNotificationTicks;
    const clock = HAS_SCHEDSTAT ? 'schedstat' : 'ticks';
    run.idleCpuPercent = ((idle1.ms[clock] - idle0.ms[clock]) * 100) / (idle1.at - idle0.at);
    run.busyCpuSeconds = (busy1.ms[clock] - busy0.ms[clock]) / 1000;
    run.busySeconds = busyMs / 1000;
    // The subscribers' share of the load core while blocks were sent: near 100 %, they bound the latency.
    run.clientCpuPercent = ((busy1.clientMs - busy0.clientMs) * 100) / busyMs;
    run.rssBeforeMb = rssBeforeKb / 1024;
    run.rssIdleMb = rssIdleKb / 1024;
    run.rssSubscribedMb = rssSubscribedKb / 1024;
    run.rssBytesPerSubscriber = ((rssSubscribedKb - rssBeforeKb) * 1024) / n;
    // The same after the blocks and the idle window: what the subscribers hold once traffic made V8 collect.
    run.rssBytesPerSubscriberAfterBlocks = ((rssIdleKb - rssBeforeKb) * 1024) / n;
    run.latenciesMs = emits.map((e, k) => {
      const lastAt = merged.blocks[warmups.length + k]?.lastAt;
      return lastAt == null ? null : lastAt - e.emittedAt;
    });
    run.firstLatenciesMs = emits.map((e, k) => {
      const firstAt = merged.blocks[warmups.length + k]?.firstAt;
      return firstAt == null ? null : firstAt - e.emittedAt;
    });
    const latencies = run.latenciesMs.filter((v) => v !== null);
    run.p50Ms = percentile(latencies, 50);
    run.p99Ms = percentile(latencies, 99);
    run.notificationBytes = emits[0]?.bytes ?? null;

    // Upstream subscriptions: every eth_subscribe the node accepted in the run (there is no other
    // client), and how many were open at each emit; the checks judge the first.
    const stats = await node.stats();
    run.upstreamSubscriptions = stats.subscribesTotal;
    run.upstreamSubscriptionsAtEmits = [...warmups, ...emits].map((e) => e.subscriptions);
    run.nodeCalls = stats.calls;
    run.errors.push(...deliveryErrors(merged, emitted, n));
    if (stats.calls.eth_getBlockByNumber) run.warnings.push(`the server backfilled ${stats.calls.eth_getBlockByNumber} block(s) over HTTP`);
    if (run.otherCpuPercent > NOISY_PERCENT) run.warnings.push(`others used ${Math.round(run.otherCpuPercent)}% of a core`);
    if (run.stealPercent > NOISY_PERCENT) run.warnings.push(`steal ${Math.round(run.stealPercent)}% of a core`);
  } catch (err) {
    run.errors.push(err.message);
  } finally {
    // Subscribers first, so the servers see their sockets close rather than a stop with open sockets.
    for (const p of started.reverse()) await p.stop();
  }
  return run;
}
