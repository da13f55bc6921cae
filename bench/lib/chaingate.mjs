import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, waitForPort } from './net.mjs';
import { startProcess } from './processes.mjs';

const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

/** The built gateway entry point, or null before `npm run build`. */
export function chaingateMain() {
  return existsSync(MAIN) ? MAIN : null;
}

/** The smallest config serving one chain on `port` from the node at `upstreamPort`, public path open. */
export function chaingateConfig({ dir, port, upstreamPort, chainId, maxConnections = 64 }) {
  return `server: { host: 127.0.0.1, port: ${port}, default_chain: bench }
storage: { path: ${JSON.stringify(join(dir, 'bench.db'))} }
# The whole pipeline runs (the per-IP limiter included); the limit is set above what the load reaches.
public: { rps_per_ip: 100000000, max_batch: 1000 }
chains:
  bench:
    chain_id: ${chainId}
    upstreams: [{ url: "http://127.0.0.1:${upstreamPort}", max_connections: ${maxConnections} }]
`;
}

/**
 * `chaingate serve` on `core` in front of 127.0.0.1:`upstreamPort`; resolves `{ proc, pid, port, url, stop }`
 * once it accepts connections. `url` is the public JSON-RPC path.
 */
export async function startChaingate({ name = 'chaingate', dir, upstreamPort, chainId, core }) {
  const main = chaingateMain();
  if (!main) throw new Error('dist/main.js is missing: run npm run build');
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const config = join(dir, 'chaingate.yaml');
  writeFileSync(config, chaingateConfig({ dir, port, upstreamPort, chainId }));
  const proc = startProcess(name, process.execPath, [main, 'serve', '--config', config], { core });
  try {
    await waitForPort(port, proc);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { proc, pid: proc.pid, port, url: `http://127.0.0.1:${port}/v1/rpc/public`, stop: () => proc.stop() };
}
