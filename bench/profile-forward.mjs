// Profiles the forwarded public eth_getBalance as http-proxy loads it: the fixed upstream and wrk
// (64 connections) on the load core (1), chaingate (workers: 1) on the server core (0).
//
//   npm run build && node bench/profile-forward.mjs [dir=bench/out/profile] [seconds=10]
//
// PROFILE_MODE picks what is taken over the measured run (after 2 s of warm-up):
//   cpu (default)  `node --cpu-prof`: self time per call by area of the road and by function (lib/profile-areas.mjs)
//   gc             `node --trace-gc-nvp`: bytes allocated per call, and collections per 1,000 calls
//   perf           `perf record -g` of the gateway with `--perf-basic-prof` (kernel and C++ too), in dir/perf.data
//   alloc          V8's sampling heap profiler over the inspector, collected objects included: bytes
//                  allocated per call by function
// PROFILE_MAIN=<another build's dist/main.js> profiles that build instead (a baseline's, built with tsc).
// PROFILE_NODE_ARGS adds node flags (e.g. `--trace-deopt`; the gateway's output is in dir/logs/chaingate.log).
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startChaingate } from './lib/chaingate.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { setLogDir, stopAll } from './lib/processes.mjs';
import { startAllocationSampling, summarizeProfiles } from './lib/profile-areas.mjs';
import { FIXED_UPSTREAM_CHAIN_ID, startFixedUpstream } from './lib/upstreams.mjs';
import { runWrk, writePostScript } from './lib/wrk.mjs';

const dir = resolve(process.argv[2] ?? join(import.meta.dirname, 'out/profile'));
const seconds = Number(process.argv[3] ?? 10);
const mode = process.env.PROFILE_MODE ?? 'cpu';
const NODE_ARGS = {
  cpu: ['--cpu-prof', '--cpu-prof-dir', dir],
  gc: ['--trace-gc-nvp'],
  perf: ['--perf-basic-prof'],
  alloc: ['--inspect=127.0.0.1:0'],
};
if (!NODE_ARGS[mode]) throw new Error(`PROFILE_MODE must be one of ${Object.keys(NODE_ARGS).join(', ')}`);

/** The gateway's log from `from` on: bytes allocated and collections, from --trace-gc-nvp's lines. */
function gcSince(logPath, from) {
  const text = readFileSync(logPath, 'latin1').slice(from);
  let allocated = 0;
  let scavenges = 0;
  let others = 0;
  for (const m of text.matchAll(/gc=(\w+).*?allocated=(\d+)/g)) {
    allocated += Number(m[2]);
    if (m[1] === 's') scavenges++;
    else others++;
  }
  return { allocated, scavenges, others };
}

rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
setLogDir(join(dir, 'logs'));
const upstream = await startFixedUpstream({ core: 1 });
try {
  const server = await startChaingate({
    name: 'chaingate',
    dir: join(dir, 'gw'),
    upstreamPort: upstream.port,
    chainId: FIXED_UPSTREAM_CHAIN_ID,
    core: 0,
    workers: 1,
    extraYaml: 'metrics: { port: 0 }\n',
    nodeArgs: [...NODE_ARGS[mode], ...(process.env.PROFILE_NODE_ARGS?.split(' ').filter(Boolean) ?? [])],
    ...(process.env.PROFILE_MAIN ? { main: process.env.PROFILE_MAIN } : {}),
  });
  const logPath = join(dir, 'logs', 'chaingate.log');
  const script = writePostScript(dir, forwardedBodies(64), 'forward.lua');
  const wrk = { url: server.url, script, connections: 64, threads: 1, core: 1 };
  await runWrk({ ...wrk, seconds: 2 });
  const logFrom = readFileSync(logPath, 'latin1').length;
  const perf =
    mode === 'perf'
      ? spawn(
          'perf',
          ['record', '-F', '2000', '-g', '-p', String(server.pid), '-o', join(dir, 'perf.data'), '--', 'sleep', String(seconds)],
          {
            stdio: 'ignore',
          },
        )
      : null;
  const sampling = mode === 'alloc' ? await startAllocationSampling(logPath) : null;
  const report = await runWrk({ ...wrk, seconds });
  if (sampling) console.log(await sampling.stop(report.requests));
  if (perf) await new Promise((r) => (perf.exitCode === null ? perf.on('exit', r) : r()));
  console.log(`requests ${report.requests}, ${Math.round(report.rps)} req/s`);
  if (mode === 'gc') {
    const gc = gcSince(logPath, logFrom);
    const per = (n) => (n / report.requests).toFixed(0);
    console.log(
      `allocated ${per(gc.allocated)} bytes per call; ${((1000 * gc.scavenges) / report.requests).toFixed(2)} scavenges and ${gc.others} other collections per 1,000 calls`,
    );
  }
  await server.stop();
  if (mode === 'cpu') {
    const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
    console.log(
      summarizeProfiles(
        files.map((f) => join(dir, f)),
        report.requests,
      ),
    );
  }
} finally {
  await stopAll();
}
