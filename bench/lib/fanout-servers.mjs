// The processes of one fan-out run: the fake node, the server under test (chaingate or the bare uWS
// relay) and the subscriber processes, each resolving `{ proc, pid, port, stop }` once it listens.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chaingateMain, serveChaingate, workersYaml } from './chaingate.mjs';
import { freePort, postJson } from './net.mjs';
import { announcedPort, startProcess, stopOnFailure } from './processes.mjs';

const FAKE_NODE = fileURLToPath(new URL('../servers/fake-node.mjs', import.meta.url));
const BARE_PUBSUB = fileURLToPath(new URL('../servers/bare-pubsub.mjs', import.meta.url));
const SUBSCRIBERS = fileURLToPath(new URL('../servers/ws-subscribers.mjs', import.meta.url));

/**
 * The fake node on `core`, with `emit()` (the next block: `{ number, emittedAt, subscriptions, bytes }`)
 * and `stats()` (`{ head, subscriptionsOpen, subscribesTotal, wsConnections, calls }`).
 */
export async function startFakeNode({ name = 'fake node', core }) {
  const proc = startProcess(name, process.execPath, [FAKE_NODE], { core });
  const node = await stopOnFailure(proc, announcedPort(proc));
  const control = async (path) => {
    const res = await postJson(`http://127.0.0.1:${node.port}${path}`, '{}');
    if (res.status !== 200) throw new Error(`fake node ${path} answered ${res.status}: ${res.body}`);
    return JSON.parse(res.body);
  };
  return {
    ...node,
    emit: () => control('/bench/emit'),
    stats: async () => {
      const r = await fetch(`http://127.0.0.1:${node.port}/bench/stats`);
      return r.json();
    },
  };
}

/**
 * The bare uWS relay of the node's newHeads on `core`; it listens once its upstream subscription is open.
 * `nodeArgs` go before the script (the inspector, for fanout-gc.mjs).
 */
export function startBarePubsub({ name = 'bare pub/sub', nodePort, core, nodeArgs = [] }) {
  const proc = startProcess(name, process.execPath, [...nodeArgs, BARE_PUBSUB, `ws://127.0.0.1:${nodePort}`], { core });
  return stopOnFailure(proc, announcedPort(proc));
}

/**
 * chaingate's config for the fan-out: the public path with limits above anything the bench sends
 * (20,000 sockets from one address, any message rate), the node's HTTP and WebSocket, a short stop,
 * `workers` worker threads (null: the key not written, for a build from before them; 'auto': not written
 * either, the default, one per core the process may use), the metrics listener on `metricsPort` (the
 * default port may be another gateway's).
 */
export function chaingateWsConfig({ dir, port, nodePort, metricsPort, workers = 1 }) {
  return `server: { host: 127.0.0.1, port: ${port}, default_chain: bench, stop_timeout_s: 1${workersYaml(workers === 'auto' ? null : workers)} }
metrics: { port: ${metricsPort} }
storage: { path: ${JSON.stringify(join(dir, 'bench.db'))} }
public: { rps_per_ip: 100000000, max_batch: 1000 }
websocket: { max_connections_per_ip: 20000 }
chains:
  bench:
    chain_id: 1
    upstreams: [{ url: "http://127.0.0.1:${nodePort}", ws: "ws://127.0.0.1:${nodePort}" }]
`;
}

/**
 * `chaingate serve` on `core` in front of the fake node; `url` is the public path's WebSocket URL.
 * `nodeArgs` go before the script (e.g. --cpu-prof); `main` is the build to run (BENCH_BASELINE's);
 * `workers` its `server.workers` (or 'auto').
 */
export async function startChaingateWs({ name = 'chaingate', dir, nodePort, core, workers = 1, nodeArgs = [], main = chaingateMain() }) {
  if (!main) throw new Error('dist/main.js is missing: run npm run build');
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const metricsPort = await freePort();
  const config = join(dir, 'chaingate.yaml');
  writeFileSync(config, chaingateWsConfig({ dir, port, nodePort, metricsPort, workers }));
  // With 'auto' there may be several workers: serveChaingate then waits for all of them to listen.
  const proc = await serveChaingate({ name, main, config, port, core, workers: workers === 'auto' ? 2 : workers, nodeArgs });
  return { proc, pid: proc.pid, port, url: `ws://127.0.0.1:${port}/v1/rpc/public`, stop: () => proc.stop() };
}

/**
 * One subscriber process on `core` (bench/servers/ws-subscribers.mjs), with `connect(options)` and
 * `report()` calling its control endpoints.
 */
export async function startSubscriberProcess({ name = 'subscribers', core }) {
  const proc = startProcess(name, process.execPath, [SUBSCRIBERS], { core });
  const started = await stopOnFailure(proc, announcedPort(proc));
  const control = async (path, body, timeoutMs) => {
    const res = await postJson(`http://127.0.0.1:${started.port}${path}`, JSON.stringify(body), timeoutMs);
    if (res.status !== 200) throw new Error(`${name} ${path} answered ${res.status}: ${res.body}`);
    return JSON.parse(res.body);
  };
  return {
    ...started,
    connect: (options) => control('/connect', options, options.timeoutMs + 5_000),
    report: () => control('/report', {}, 10_000),
  };
}
