import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { freePort, waitForPort } from './net.mjs';
import { announcedPort, startProcess, stopOnFailure } from './processes.mjs';

const FIXED_UPSTREAM = fileURLToPath(new URL('../servers/fixed-upstream.mjs', import.meta.url));
const BUNDLED_ANVIL = fileURLToPath(new URL('../../node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil', import.meta.url));

/** The anvil binary: BENCH_ANVIL, else the one in node_modules; null when neither exists. */
export function anvilPath() {
  const p = process.env.BENCH_ANVIL || BUNDLED_ANVIL;
  return existsSync(p) ? p : null;
}

/**
 * The chain id a config must give the fixed upstream's chain: it answers every call with 0x1b4, its
 * `eth_chainId` too, and chaingate keeps a node whose chain id is not the configured one out of rotation.
 */
export const FIXED_UPSTREAM_CHAIN_ID = 0x1b4;

/** The fixed-answer uWS server on `core`; resolves `{ proc, pid, port, stop }` once it listens. */
export function startFixedUpstream({ name = 'fixed upstream', core }) {
  const proc = startProcess(name, process.execPath, [FIXED_UPSTREAM], { core });
  return stopOnFailure(proc, announcedPort(proc));
}

/**
 * anvil on `core`; resolves `{ proc, pid, port, stop }` once it listens. By default it binds port 0 and
 * logs every call, as `anvil --port 0` does. `quiet` drops the per-call log line (a write per request,
 * which no production node pays); quiet anvil prints nothing, so it gets a port chosen here.
 */
export async function startAnvil({ name = 'anvil', core, quiet = false }) {
  const bin = anvilPath();
  if (!bin) throw new Error('anvil not found: run npm install, or set BENCH_ANVIL');
  if (!quiet) {
    const proc = startProcess(name, bin, ['--host', '127.0.0.1', '--port', '0'], { core });
    return stopOnFailure(proc, announcedPort(proc));
  }
  const port = await freePort();
  const proc = startProcess(name, bin, ['--host', '127.0.0.1', '--port', String(port), '--quiet'], { core });
  return stopOnFailure(
    proc,
    waitForPort(port, proc).then(() => ({ proc, pid: proc.pid, port, stop: () => proc.stop() })),
  );
}
