// Section: newHeads fan-out over WebSocket. One upstream subscription at a fake node, relayed to 1,000
// and 10,000 subscribers by chaingate (public path) and, side by side in the same run, by a bare uWS
// pub/sub relay: the floor, what the kernel's sends cost. See bench/README.md (ws-fanout).
import { spawnSync } from 'node:child_process';
import { chaingateMain } from './lib/chaingate.mjs';
import { measureFanout } from './lib/fanout-measure.mjs';
import { readFanoutSettings } from './lib/fanout-settings.mjs';
import { notRun } from './lib/measure.mjs';
import { registerRunTable } from './lib/report.mjs';
import { checkerFor } from './lib/checks.mjs';

export const id = 'ws-fanout';
export const title = 'WebSocket newHeads fan-out (one upstream subscription, public path)';

/** Targets of this section; a check whose inputs errored or were skipped reads ERROR/SKIP, never PASS. */
const TARGETS = {
  cpuRatio: 1, // chaingate / bare uWS CPU per notification, at most (issue 30)
  rssKbPerSubscriber: 2, // chaingate's (default workers) RSS per idle subscriber 15 s after subscribing, KB at most
  upstreamSubscriptions: 1, // eth_subscribe calls the node got from chaingate, exactly
  // Against BENCH_BASELINE's build in the same run: CPU within 5 %, idle RSS no higher than the 5 %
  // two runs of one build differ by.
  cpuBaseline: 1.05,
  rssBaseline: 1.05,
};

/** File descriptors a process needs beyond its sockets (listeners, logs, the node link, SQLite). */
const SPARE_FDS = 100;

/**
 * The servers of a run at `n` subscribers of `counts`: bare uWS and chaingate with one worker thread on the
 * server core; at the largest count, chaingate with the default workers (`auto`: one per core, two on the
 * two cores it runs on); with BENCH_BASELINE, the baseline commit's build the same ways after this tree's.
 */
function serversFor(ctx, n, counts) {
  const { serverCore, spreadCores } = ctx.settings;
  const largest = n === Math.max(...counts);
  const base = ctx.baseline;
  return [
    { kind: 'bare', name: 'bare uWS pub/sub', core: serverCore },
    { kind: 'chaingate', name: 'chaingate (workers: 1)', workers: 1, core: serverCore },
    ...(largest ? [{ kind: 'chaingate-auto', name: 'chaingate (workers: auto)', workers: 'auto', core: spreadCores }] : []),
    ...(base ? [{ kind: 'baseline', name: `chaingate @${base.ref}`, workers: base.workers, core: serverCore }] : []),
    ...(base && largest
      ? [{ kind: 'baseline-auto', name: `chaingate @${base.ref} (workers: auto)`, workers: 'auto', core: spreadCores }]
      : []),
  ];
}

const count = (n) => n.toLocaleString('en-US');
const fixed = (digits) => (v) => (v == null ? '–' : v.toFixed(digits));
const ms = (v) => (v == null ? '–' : v < 10 ? v.toFixed(2) : v.toFixed(1));

function notes(run) {
  if (run.skipped) return `skipped: ${run.skipped}`;
  const out = run.errors.map((e) => `ERROR: ${e.split('\n')[0]}`);
  if (run.rounds) out.unshift(`median of CPU ms/notification ${run.rounds.map((r) => fixed(1)(r.cpuMsPerNotification)).join(', ')}`);
  if (run.warnings?.length) out.push(`warnings: ${run.warnings.join(', ')}`);
  return out.join('; ');
}

registerRunTable(id, {
  head: [
    'target',
    'p50 ms',
    'p99 ms',
    'CPU ms/notification',
    'CPU µs/subscriber',
    'idle CPU %',
    'RSS MB before',
    'RSS MB 15 s after N subs',
    'RSS B/subscriber',
    'RSS MB after blocks',
    'upstream subs',
    'notes',
  ],
  row: (r) => [
    r.label,
    ms(r.p50Ms),
    ms(r.p99Ms),
    fixed(1)(r.cpuMsPerNotification),
    r.cpuMsPerNotification == null ? '–' : fixed(2)((r.cpuMsPerNotification * 1000) / r.subscribers),
    fixed(1)(r.idleCpuPercent),
    fixed(1)(r.rssBeforeMb),
    fixed(1)(r.rssSubscribedMb),
    fixed(0)(r.rssBytesPerSubscriber),
    fixed(1)(r.rssIdleMb),
    r.upstreamSubscriptions == null ? '–' : String(r.upstreamSubscriptions),
    notes(r),
  ],
  rightAligned: new Set([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
});

const usable = (run) => run && !run.skipped && run.errors.length === 0 && run.cpuMsPerNotification != null;
const check = checkerFor(usable);

/** The section's targets, for each subscriber count measured, judged on the runs (merged across rounds). */
export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  const counts = [...new Set(runs.map((r) => r.subscribers).filter((n) => n != null))];
  return counts.flatMap((n) => {
    const [chaingate, bare, baseline, auto, baseAuto] = ['chaingate', 'bare', 'baseline', 'chaingate-auto', 'baseline-auto'].map(
      (kind) => by[`${kind}-${n}`],
    );
    const againstBaseline = baseline
      ? [
          check(
            `CPU per notification chaingate / baseline, ${count(n)} subscribers`,
            [chaingate, baseline],
            (c, b) => c.cpuMsPerNotification / b.cpuMsPerNotification,
            `≤ ${TARGETS.cpuBaseline}`,
            (v) => v <= TARGETS.cpuBaseline,
          ),
          check(
            `RSS with ${count(n)} idle subscribers chaingate / baseline`,
            [chaingate, baseline],
            (c, b) => c.rssSubscribedMb / b.rssSubscribedMb,
            `≤ ${TARGETS.rssBaseline}`,
            (v) => v <= TARGETS.rssBaseline,
          ),
        ]
      : [];
    const autoAgainstBaseline = baseAuto
      ? [
          check(
            `RSS per idle subscriber chaingate workers: auto / baseline workers: auto, ${count(n)} subscribers`,
            [auto, baseAuto],
            (c, b) => c.rssBytesPerSubscriber / b.rssBytesPerSubscriber,
            'reported',
          ),
        ]
      : [];
    // The default workers keep the one-thread targets and carry the RSS one; what they cost in CPU over
    // one thread is a figure, not judged.
    const withAuto = auto
      ? [
          ...gatewayChecks('chaingate workers: auto', auto, bare, n, true),
          check(
            `CPU per notification chaingate workers: auto / workers: 1, ${count(n)} subscribers`,
            [auto, chaingate],
            (w, w1) => w.cpuMsPerNotification / w1.cpuMsPerNotification,
            'reported',
          ),
        ]
      : [];
    return [...againstBaseline, ...autoAgainstBaseline, ...gatewayChecks('chaingate', chaingate, bare, n, !auto), ...withAuto];
  });
}

/**
 * The targets of one chaingate row (`name` as the checks call it) at `n` subscribers, beside bare uWS;
 * the RSS per idle subscriber is judged when `judgeRss` (the default workers' row, or the one-thread row
 * at a count run without it), else reported.
 */
function gatewayChecks(name, chaingate, bare, n, judgeRss) {
  return [
    check(
      `CPU per notification ${name} / bare, ${count(n)} subscribers`,
      [chaingate, bare],
      (c, b) => c.cpuMsPerNotification / b.cpuMsPerNotification,
      `≤ ${TARGETS.cpuRatio}`,
      (v) => v <= TARGETS.cpuRatio,
    ),
    check(
      `${name} RSS per idle subscriber 15 s after subscribing (KB), ${count(n)} subscribers, median of the rounds`,
      [chaingate],
      (c) => c.rssBytesPerSubscriber / 1024,
      `≤ ${TARGETS.rssKbPerSubscriber}`,
      judgeRss ? (v) => v <= TARGETS.rssKbPerSubscriber : undefined,
    ),
    check(
      `${name} upstream subscriptions, ${count(n)} subscribers`,
      [chaingate],
      (c) => c.upstreamSubscriptions,
      `= ${TARGETS.upstreamSubscriptions}`,
      (v) => v === TARGETS.upstreamSubscriptions,
    ),
  ];
}

/** The soft limit on open files this process (and so every child) has. */
function openFilesLimit() {
  const r = spawnSync('sh', ['-c', 'ulimit -n']);
  const v = r.stdout?.toString().trim();
  return v === 'unlimited' ? Infinity : Number(v) || null;
}

export async function run(ctx) {
  const read = readFanoutSettings({ quick: ctx.settings.quick });
  const cannotRun = (reason) => [notRun({ id, label: title, reason, error: true })];
  if (read.errors) return cannotRun(`bad settings: ${read.errors.join('; ')}`);
  const fanout = read.settings;
  if (!chaingateMain()) return cannotRun('dist/main.js is missing: run npm run build');
  const limit = openFilesLimit();
  const runs = [];
  for (const n of fanout.subscribers) {
    for (const { kind, name, workers, core } of serversFor(ctx, n, fanout.subscribers)) {
      const id = `${kind}-${n}`;
      const label = `${name}, ${count(n)} subscribers`;
      // The server holds all n sockets; a subscriber process, its share.
      if (limit !== null && n + SPARE_FDS > limit) {
        runs.push({
          ...notRun({ id, label, reason: `ulimit -n is ${limit}: raise it above ${n + SPARE_FDS} (e.g. ulimit -n 65536)`, error: true }),
          subscribers: n,
        });
        continue;
      }
      runs.push(await measureFanout({ id, label, kind, workers, core, n, ctx, fanout }));
    }
  }
  return runs;
}
