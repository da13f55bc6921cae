// Profiles one gateway's forwarded public eth_getBalance under wrk, as http-proxy loads it: the fixed upstream
// and wrk on the load core, chaingate (workers: 1) on the server core under `node --cpu-prof`. Writes the
// profiles to the directory given (default bench/out/profile) and prints self time by area, from
// bench/lib/profile-areas.mjs. `node bench/profile-forward.mjs [dir] [seconds]` after `npm run build`;
// PROFILE_MAIN=<dist/main.js of another build> profiles that build instead.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startChaingate } from './lib/chaingate.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { setLogDir, stopAll } from './lib/processes.mjs';
import { summarizeProfiles } from './lib/profile-areas.mjs';
import { FIXED_UPSTREAM_CHAIN_ID, startFixedUpstream } from './lib/upstreams.mjs';
import { runWrk, writePostScript } from './lib/wrk.mjs';

const dir = resolve(process.argv[2] ?? join(import.meta.dirname, 'out/profile'));
const seconds = Number(process.argv[3] ?? 10);
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
setLogDir(join(dir, 'logs'));
const upstream = await startFixedUpstream({ core: 1 });
try {
  const server = await startChaingate({
    dir: join(dir, 'gw'),
    upstreamPort: upstream.port,
    chainId: FIXED_UPSTREAM_CHAIN_ID,
    core: 0,
    workers: 1,
    extraYaml: 'metrics: { port: 0 }\n',
    nodeArgs: process.env.PROFILE_PERF || process.env.PROFILE_SYSCALLS ? ['--perf-basic-prof'] : ['--cpu-prof', '--cpu-prof-dir', dir],
    ...(process.env.PROFILE_MAIN ? { main: process.env.PROFILE_MAIN } : {}),
  });
  const script = writePostScript(dir, forwardedBodies(64), 'forward.lua');
  const wrk = { url: server.url, script, connections: 64, threads: 1, core: 1 };
  await runWrk({ ...wrk, seconds: 2 });
  // PROFILE_PERF=1: `perf record` samples the gateway (kernel and native code too) instead of --cpu-prof.
  // PROFILE_SYSCALLS=1: `perf stat` counts the gateway's system calls instead (printed per call).
  const events = ['read', 'write', 'writev', 'sendto', 'sendmsg', 'recvfrom', 'epoll_wait', 'epoll_ctl', 'getpeername', 'futex']
    .map((c) => `syscalls:sys_enter_${c}`)
    .join(',');
  const perfArgs = process.env.PROFILE_SYSCALLS
    ? ['stat', '-x', ',', '-e', events, '-p', String(server.pid), '-o', join(dir, 'syscalls.csv')]
    : ['record', '-F', '2000', '-g', '-p', String(server.pid), '-o', join(dir, 'perf.data')];
  const perf =
    process.env.PROFILE_PERF || process.env.PROFILE_SYSCALLS
      ? spawn('perf', [...perfArgs, '--', 'sleep', String(seconds)], { stdio: 'ignore' })
      : null;
  const report = await runWrk({ ...wrk, seconds });
  if (perf) await new Promise((r) => (perf.exitCode === null ? perf.on('exit', r) : r()));
  if (process.env.PROFILE_SYSCALLS) {
    for (const line of readFileSync(join(dir, 'syscalls.csv'), 'utf8').split('\n')) {
      const [count, , name] = line.split(',');
      if (name?.startsWith('syscalls:')) console.log(`${(Number(count) / report.requests).toFixed(3)} ${name.slice(19)} per call`);
    }
  }
  console.log(`requests ${report.requests}, ${Math.round(report.rps)} req/s`);
  await server.stop();
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  console.log(
    summarizeProfiles(
      files.map((f) => join(dir, f)),
      report.requests,
    ),
  );
} finally {
  await stopAll();
}
