// Preloaded into the gateway by bench/profile-stages.mjs (`node --import <this> dist/main.js serve`), never by
// the daemon itself. Each SIGUSR2 moves it one step, so the profiles cover only the measured windows and not
// the start-up or the warm-up:
//   1st: CPU profile and GC count start;   2nd: they stop, written as cpu.cpuprofile and gc.json;
//   3rd: allocation sampling starts;       4th: it stops, written as alloc.heapprofile.
// The two are taken in separate windows, as the allocation sampler (which follows collected objects too)
// slows every allocation and would skew the CPU profile. Files go to PROFILE_PROBE_DIR.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';

const dir = process.env.PROFILE_PROBE_DIR;
if (!dir) throw new Error('profile-probe: PROFILE_PROBE_DIR is not set');

/** µs between CPU samples: finer than --cpu-prof's 1 ms, as a call costs some 20-60 µs. */
const CPU_SAMPLING_US = 100;
/** Mean bytes between allocation samples. */
const ALLOC_SAMPLING_BYTES = 512;

const session = new Session();
session.connect();
const post = (method, params) =>
  new Promise((resolve, reject) => session.post(method, params, (err, result) => (err ? reject(err) : resolve(result))));

const gc = { count: 0, ms: 0, byKind: {} };
const observer = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gc.count++;
    gc.ms += e.duration;
    const kind = String(e.detail?.kind ?? e.kind);
    gc.byKind[kind] = (gc.byKind[kind] ?? 0) + e.duration;
  }
});

let step = 0;
const steps = [
  async () => {
    await post('Profiler.enable');
    await post('Profiler.setSamplingInterval', { interval: CPU_SAMPLING_US });
    observer.observe({ entryTypes: ['gc'] });
    await post('Profiler.start');
  },
  async () => {
    const { profile } = await post('Profiler.stop');
    observer.disconnect();
    writeFileSync(join(dir, 'cpu.cpuprofile'), JSON.stringify(profile));
    writeFileSync(join(dir, 'gc.json'), JSON.stringify(gc));
  },
  () =>
    post('HeapProfiler.startSampling', {
      samplingInterval: ALLOC_SAMPLING_BYTES,
      includeObjectsCollectedByMinorGC: true,
      includeObjectsCollectedByMajorGC: true,
    }),
  async () => {
    const { profile } = await post('HeapProfiler.stopSampling');
    writeFileSync(join(dir, 'alloc.heapprofile'), JSON.stringify({ ...profile, samplingInterval: ALLOC_SAMPLING_BYTES }));
  },
];

process.on('SIGUSR2', () => {
  const run = steps[step++];
  if (run === undefined) return;
  Promise.resolve(run()).then(
    () => writeFileSync(join(dir, `step-${step}.done`), ''),
    (err) => writeFileSync(join(dir, `step-${step}.failed`), String(err?.stack ?? err)),
  );
});
