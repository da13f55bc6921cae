import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, waitForPort } from './net.mjs';
import { startProcess, stopOnFailure } from './processes.mjs';

const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const UNIT = fileURLToPath(new URL('../../systemd/chaingate.service', import.meta.url));

/**
 * The node flags the shipped systemd unit runs the daemon with (its `Environment=NODE_OPTIONS=...`: the unit
 * runs the installed `chaingate` command), so the bench runs it as operators do.
 */
export function daemonNodeFlags() {
  const options = readFileSync(UNIT, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Environment=NODE_OPTIONS='));
  if (options === undefined) throw new Error(`${UNIT}: no Environment=NODE_OPTIONS= line, which gives the bench the daemon's node flags`);
  return options.slice('Environment=NODE_OPTIONS='.length).trim().split(/\s+/);
}

/** The built gateway entry point, or null before `npm run build`. */
export function chaingateMain() {
  return existsSync(MAIN) ? MAIN : null;
}

/**
 * The `server.workers` entry of a bench config (`, workers: N`), or none when `workers` is null: a build
 * from before worker threads refuses the key (see knowsWorkers). The bench always writes it otherwise, as
 * the default (`auto`, the cores the process may use) would make a row's shape depend on its pinning.
 */
export const workersYaml = (workers) => (workers == null ? '' : `, workers: ${workers}`);

/** The chain's `upstreams` entry: the node at `upstreamPort`, or each of `upstreamPorts` (named u1, u2, …). */
function upstreamsYaml(upstreamPort, upstreamPorts, maxConnections) {
  if (!upstreamPorts) return `[{ url: "http://127.0.0.1:${upstreamPort}", max_connections: ${maxConnections} }]`;
  const each = upstreamPorts.map((p, i) => `{ name: u${i + 1}, url: "http://127.0.0.1:${p}", max_connections: ${maxConnections} }`);
  return `[${each.join(', ')}]`;
}

/**
 * The smallest config serving one chain on `port` from the node at `upstreamPort` (or the nodes at
 * `upstreamPorts`), public path open. `extraYaml` is appended as top-level sections (e.g. `cache: {
 * max_bytes: 0 }`), `chainYaml` as keys of the chain (e.g. `consistency: { ... }`); other keys keep their
 * defaults. `trustProxy` sets `server.trust_proxy` (the client IP read from X-Forwarded-For); `workers`,
 * `server.workers` (null: not written); `storageYaml` replaces the SQLite file in `dir` (a fleet's
 * `storage: { url }` and `cluster`).
 */
export function chaingateConfig({
  dir,
  port,
  upstreamPort,
  upstreamPorts,
  chainId,
  maxConnections = 64,
  trustProxy = false,
  workers = 1,
  extraYaml = '',
  chainYaml = '',
  storageYaml = `storage: { path: ${JSON.stringify(join(dir, 'bench.db'))} }\n`,
}) {
  return `server: { host: 127.0.0.1, port: ${port}, default_chain: bench${trustProxy ? ', trust_proxy: true' : ''}${workersYaml(workers)} }
${storageYaml}# The whole pipeline runs (limiters and metering included); the limits are set above what the load reaches.
public: { rps_per_ip: 100000000, max_batch: 1000 }
plans: { bench: { rps: 100000000, max_endpoints: 10 } }
chains:
  bench:
    chain_id: ${chainId}
    upstreams: ${upstreamsYaml(upstreamPort, upstreamPorts, maxConnections)}
${chainYaml ? `    ${chainYaml}\n` : ''}${extraYaml}`;
}

/**
 * `node <daemon flags> <nodeArgs> <main> serve --config <config>` on `core` (a core or a list, `0,1`);
 * resolves the process once the gateway serves on `port`. With worker threads the port answers as soon as
 * the first worker listens, so it also waits for the `listening` line, logged once every worker listens:
 * a load started before would put all its connections on the first one.
 */
export async function serveChaingate({ name, main, config, port, core, workers, nodeArgs = [] }) {
  const proc = startProcess(name, process.execPath, [...daemonNodeFlags(), ...nodeArgs, main, 'serve', '--config', config], { core });
  try {
    await waitForPort(port, proc);
    if (workers > 1) await proc.waitFor(/"msg":"listening"/);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return proc;
}

/**
 * Whether the build `main` knows `server.workers` (`chaingate check-config` accepts it): a BENCH_BASELINE
 * commit from before worker threads refuses the key, and runs as one thread without it.
 */
export function knowsWorkers(main, dir) {
  mkdirSync(dir, { recursive: true });
  const config = join(dir, 'workers-probe.yaml');
  writeFileSync(config, chaingateConfig({ dir, port: 1, upstreamPort: 1, chainId: 1, workers: 1 }));
  const r = spawnSync(process.execPath, [main, 'check-config', '--config', config], { encoding: 'utf8' });
  if (r.status === 0) return true;
  if (/server\.workers/.test(`${r.stdout}${r.stderr}`)) return false;
  throw new Error(`${main} check-config failed on the bench's config: ${r.stdout}${r.stderr}`);
}

/**
 * `chaingate serve` on `core` in front of 127.0.0.1:`upstreamPort` (or each of `upstreamPorts`, with the chain's
 * keys `chainYaml`); resolves `{ proc, pid, port, url, stop }`
 * once it accepts connections. `url` is the public JSON-RPC path; when `keyed`, that of an endpoint made
 * for an owner made with the CLI, whose `managementKey` is returned too. `main` is the build to run
 * (another commit's, for BENCH_BASELINE's rows); `workers` its `server.workers` (null: not written);
 * `storageYaml` its store, when not a SQLite file in `dir` (see chaingateConfig); `nodeArgs` go before
 * the script (e.g. --cpu-prof). Also returned: `config` (its file, for the operator commands), `main`,
 * and when keyed the endpoint's `endpointId`. `stop(graceMs)` sends SIGTERM, and SIGKILL after `graceMs` (3 s).
 */
export async function startChaingate({
  name = 'chaingate',
  dir,
  upstreamPort,
  upstreamPorts,
  chainId,
  core,
  keyed = false,
  trustProxy = false,
  workers = 1,
  extraYaml,
  chainYaml,
  storageYaml,
  nodeArgs,
  main = chaingateMain(),
}) {
  if (!main) throw new Error('dist/main.js is missing: run npm run build');
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const config = join(dir, 'chaingate.yaml');
  writeFileSync(
    config,
    chaingateConfig({ dir, port, upstreamPort, upstreamPorts, chainId, trustProxy, workers, extraYaml, chainYaml, storageYaml }),
  );
  const proc = await serveChaingate({ name, main, config, port, core, workers, nodeArgs });
  // Keyed: an owner with RU for far more calls than a run makes, so every call is looked up, limited and
  // metered. Made once serve has made the database: the operator commands make none.
  const owner = keyed
    ? await stopOnFailure(
        proc,
        Promise.resolve().then(() =>
          JSON.parse(
            execFileSync(
              process.execPath,
              [main, 'owner', 'create', '--name', 'bench', '--plan', 'bench', '--ru', '1000000000000', '--json', '--config', config],
              { encoding: 'utf8' },
            ),
          ),
        ),
      )
    : null;
  let url = `http://127.0.0.1:${port}/v1/rpc/public`;
  let endpointId;
  if (owner) ({ url, id: endpointId } = await stopOnFailure(proc, createEndpoint(port, owner.management_key)));
  return {
    proc,
    pid: proc.pid,
    port,
    url,
    config,
    main,
    endpointId,
    managementKey: owner?.management_key,
    stop: (graceMs) => proc.stop(graceMs),
  };
}

/**
 * An endpoint made through the management REST, as a user would; resolves `{ id, apiKey, url }`, `url`
 * being its JSON-RPC URL on 127.0.0.1.
 */
export async function createEndpoint(port, managementKey, name = 'bench') {
  const res = await fetch(`http://127.0.0.1:${port}/api/dashboard/endpoints`, {
    method: 'POST',
    headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ network: 'bench', name }),
  });
  if (res.status !== 201) throw new Error(`creating the ${name} endpoint answered ${res.status}: ${await res.text()}`);
  const { data } = await res.json();
  return { id: data.id, apiKey: data.api_key, url: `http://127.0.0.1:${port}/v1/rpc/${data.api_key}` };
}

/** Deletes endpoint `id` through the management REST; rejects unless the gateway says it did. */
export async function deleteEndpoint(port, managementKey, id) {
  const res = await fetch(`http://127.0.0.1:${port}/api/dashboard/endpoints?id=${encodeURIComponent(id)}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${managementKey}` },
  });
  if (res.status !== 200) throw new Error(`deleting endpoint ${id} answered ${res.status}: ${await res.text()}`);
}
