// Where a forwarded call's CPU and allocations go, stage by stage (issue 30): the http-proxy section's load
// (eth_getBalance of rotating addresses, the fixed upstream, one worker) on the public path and on a keyed,
// metered endpoint, each profiled under wrk. Not a section of `npm run bench`: run it after `npm run build`,
//   node bench/profile-stages.mjs                      # both paths, 10 s windows
//   PROFILE_PATHS=keyed PROFILE_SECONDS=20 node bench/profile-stages.mjs
// Settings as the bench's: BENCH_SERVER_CORE / BENCH_LOAD_CORE (0 / 1), BENCH_CONNECTIONS (64). PROFILE_MAIN runs
// another build's dist/main.js (a baseline's, built as bench/run.mjs builds BENCH_BASELINE), its files under
// PROFILE_LABEL (default `this`).
// The gateway runs as the bench runs it, with bench/lib/profile-probe.mjs preloaded: after a 5 s warm-up, a
// CPU profile window (CPU sampled every 100 µs, GC counted), then an allocation-sampling window, each under
// wrk. Prints µs of self time per call by stage and by function, the allocations per call, and writes the
// profiles (open cpu.cpuprofile in Chrome DevTools) and a summary.json to bench/out/profile/<label>/<path>/.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chaingateMain, startChaingate } from './lib/chaingate.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { CLK_TCK, treeCpuTicks } from './lib/proc-stats.mjs';
import { setLogDir, stopAll } from './lib/processes.mjs';
import { allocStages, cpuStages } from './lib/profile-stages.mjs';
import { FIXED_UPSTREAM_CHAIN_ID, startFixedUpstream } from './lib/upstreams.mjs';
import { runWrk, writePostScript } from './lib/wrk.mjs';

const OUT = fileURLToPath(new URL('./out/profile/', import.meta.url));
const PROBE = fileURLToPath(new URL('./lib/profile-probe.mjs', import.meta.url));
const env = process.env;
const seconds = Number(env.PROFILE_SECONDS ?? 10);
const paths = (env.PROFILE_PATHS ?? 'public,keyed').split(',');
const serverCore = env.BENCH_SERVER_CORE ?? '0';
const loadCore = env.BENCH_LOAD_CORE ?? '1';
const connections = Number(env.BENCH_CONNECTIONS ?? 64);
const label = env.PROFILE_LABEL ?? 'this';
const main = env.PROFILE_MAIN ?? chaingateMain();

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Sends SIGUSR2 (the probe's next step) and waits for the step's file. */
async function probeStep(pid, dir, step) {
  process.kill(pid, 'SIGUSR2');
  for (let waited = 0; waited < 30_000; waited += 50) {
    if (existsSync(join(dir, `step-${step}.done`))) return;
    if (existsSync(join(dir, `step-${step}.failed`))) throw new Error(readFileSync(join(dir, `step-${step}.failed`), 'utf8'));
    await sleep(50);
  }
  throw new Error(`the probe did not finish step ${step}`);
}

const fmt = (v, digits = 2) => (v == null ? '–' : v.toFixed(digits));

function printStages(title, cpu, alloc, gc, cpuUsPerCall, calls) {
  console.log(`\n## ${title}\n`);
  console.log(
    `${calls.cpu} calls profiled; CPU per call from /proc over the window: ${fmt(cpuUsPerCall)} µs; ` +
      `profiled busy time: ${fmt(cpu.busyUsPerCall)} µs/call; GC: ${gc.count} pauses, ${fmt((gc.ms * 1000) / calls.cpu)} µs/call; ` +
      `allocations: ${fmt(alloc.allocationsPerCall, 1)} per call, ${fmt(alloc.bytesPerCall, 0)} B per call (${calls.alloc} calls sampled). ` +
      `The /proc figure less the profiled one (${fmt(cpuUsPerCall - cpu.busyUsPerCall)} µs) is native work the profiler counts as idle ` +
      "(uWS reading and parsing requests, libuv reading sockets, in the event loop's poll phase) and the profiler's own cost.\n",
  );
  const allocBy = new Map(alloc.stages.map((s) => [s.name, s]));
  console.log('| stage | µs/call (self) | share | allocations/call | bytes/call |');
  console.log('|---|---:|---:|---:|---:|');
  for (const s of cpu.stages) {
    const a = allocBy.get(s.name);
    console.log(
      `| ${s.name} | ${fmt(s.usPerCall)} | ${fmt(s.share * 100, 1)} % | ${fmt(a?.allocationsPerCall, 1)} | ${fmt(a?.bytesPerCall, 0)} |`,
    );
  }
  console.log('\nTop functions by self time:\n');
  console.log('| function | µs/call | share |');
  console.log('|---|---:|---:|');
  for (const f of cpu.functions) console.log(`| \`${f.name}\` | ${fmt(f.usPerCall)} | ${fmt(f.share * 100, 1)} % |`);
  console.log('\nTop allocating functions:\n');
  console.log('| function | allocations/call | bytes/call |');
  console.log('|---|---:|---:|');
  for (const f of alloc.functions) console.log(`| \`${f.name}\` | ${fmt(f.allocationsPerCall, 2)} | ${fmt(f.bytesPerCall, 0)} |`);
}

async function profilePath(path, upstream, script) {
  const dir = join(OUT, label, path);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  env.PROFILE_PROBE_DIR = dir;
  const server = await startChaingate({
    name: `chaingate-${path}`,
    dir: join(dir, 'gateway'),
    upstreamPort: upstream.port,
    chainId: FIXED_UPSTREAM_CHAIN_ID,
    core: serverCore,
    keyed: path === 'keyed',
    extraYaml: 'metrics: { port: 0 }\n',
    nodeArgs: ['--import', PROBE],
    main,
  });
  try {
    const wrk = (name, s) => runWrk({ name, url: server.url, script, seconds: s, connections, threads: 1, core: loadCore });
    await wrk(`wrk warm-up ${path}`, 5);
    await probeStep(server.pid, dir, 1);
    const ticks = treeCpuTicks(server.pid);
    const cpuRun = await wrk(`wrk cpu ${path}`, seconds);
    const cpuSeconds = (treeCpuTicks(server.pid) - ticks) / CLK_TCK;
    await probeStep(server.pid, dir, 2);
    await probeStep(server.pid, dir, 3);
    const allocRun = await wrk(`wrk alloc ${path}`, seconds);
    await probeStep(server.pid, dir, 4);
    const calls = { cpu: cpuRun.requests, alloc: allocRun.requests };
    for (const r of [cpuRun, allocRun]) if (r.non2xx > 0) throw new Error(`${path}: ${r.non2xx} non-2xx answers`);
    const cpu = cpuStages(JSON.parse(readFileSync(join(dir, 'cpu.cpuprofile'), 'utf8')), calls.cpu);
    const alloc = allocStages(JSON.parse(readFileSync(join(dir, 'alloc.heapprofile'), 'utf8')), calls.alloc);
    const gc = JSON.parse(readFileSync(join(dir, 'gc.json'), 'utf8'));
    const cpuUsPerCall = (cpuSeconds * 1e6) / calls.cpu;
    printStages(
      `${label}, ${path} path: eth_getBalance forwarded to the fixed upstream, ${cpuRun.rps.toFixed(0)} req/s while profiled`,
      cpu,
      alloc,
      gc,
      cpuUsPerCall,
      calls,
    );
    writeFileSync(join(dir, 'summary.json'), JSON.stringify({ path, calls, rps: cpuRun.rps, cpuUsPerCall, gc, cpu, alloc }, null, 2));
  } finally {
    await server.stop();
  }
}

mkdirSync(OUT, { recursive: true });
setLogDir(join(OUT, 'logs'));
const script = writePostScript(OUT, forwardedBodies(connections), 'profile.lua');
const upstream = await startFixedUpstream({ name: 'profile-upstream', core: loadCore });
try {
  for (const path of paths) await profilePath(path, upstream, script);
} finally {
  await upstream.stop();
  await stopAll();
}
