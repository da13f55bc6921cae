import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig, type Config } from '../config/schema.js';
import { chainUrls } from '../server/management.js';
import { createOwnerAdmin } from '../tenancy/owners.js';
import type { Logger } from '../log.js';
import { startGateway, type Gateway } from '../server/app.js';
import { type AnvilNode, startAnvil } from './anvil.js';
import { type BeaconNode, startBeaconNode } from './beacon/beacon-node.js';

/**
 * The embedded devnet: anvil with 1-second blocks as chain `devnet`, and a small local beacon node
 * following it (a slot per block) as chain `devnet-beacon`, with the gateway in front of both.
 */
export interface Devnet {
  readonly anvil: AnvilNode;
  readonly beacon: BeaconNode;
  readonly gateway: Gateway;
  readonly config: Config;
  /** The demo owner made at start, so private access can be tried at once. */
  readonly demo: { ownerId: number; managementKey: string; endpointId: string; apiKey: string };
  /** Stops the gateway gracefully, then anvil. */
  stop(): Promise<void>;
}

export interface DevnetOptions {
  port: number;
  host?: string;
  log: Logger;
  blockTime?: number;
}

export const DEVNET_CHAIN_ID = 31337;

export function devnetConfig(anvil: AnvilNode, beaconUrl: string, port: number, host: string, dbPath: string): Config {
  const result = validateConfig({
    server: { host, port, default_chain: 'devnet' },
    storage: { path: dbPath },
    chains: {
      devnet: {
        name: 'Local devnet',
        kind: 'evm',
        chain_id: DEVNET_CHAIN_ID,
        upstreams: [{ url: anvil.url, ws: anvil.wsUrl }],
      },
      'devnet-beacon': {
        name: 'Local devnet (consensus layer)',
        kind: 'beacon',
        upstreams: [{ url: beaconUrl }],
      },
    },
  });
  if (!result.ok) throw new Error(`devnet config is invalid: ${result.errors.join('; ')}`);
  return result.config;
}

/** A free loopback port, so the URLs the devnet prints and serves carry the real port even for --port 0. */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function startDevnet(opts: DevnetOptions): Promise<Devnet> {
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port === 0 ? await freePort(host) : opts.port;
  const anvil = await startAnvil({ chainId: DEVNET_CHAIN_ID, blockTime: opts.blockTime ?? 1 });
  let beacon: BeaconNode;
  try {
    beacon = await startBeaconNode({ executionUrl: anvil.url });
  } catch (err) {
    await anvil.stop();
    throw err;
  }
  // The devnet's chain starts empty every time, and so does its database: keys printed are this run's.
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-devnet-'));
  const config = devnetConfig(anvil, beacon.url, port, host, join(dir, 'devnet.db'));
  let gateway: Gateway;
  try {
    gateway = await startGateway(config, { log: opts.log, port });
  } catch (err) {
    await beacon.stop();
    await anvil.stop();
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`port ${port} on ${host} is taken: stop what uses it or choose another with --port`, { cause: err });
  }
  const { tenancy } = gateway.context;
  const owner = createOwnerAdmin(tenancy.store).createOwner('demo', 'growth', 10_000_000);
  const made = tenancy.directory.createEndpoint(owner.id, 'devnet', 'demo', config.plans.growth?.max_endpoints ?? 50);
  if ('error' in made) throw new Error(`devnet: cannot create the demo endpoint (${made.error})`);
  return {
    anvil,
    beacon,
    gateway,
    config,
    demo: { ownerId: owner.id, managementKey: owner.managementKey, endpointId: made.endpoint.id, apiKey: made.apiKey },
    async stop() {
      await gateway.stop();
      await beacon.stop();
      await anvil.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** What `chaingate devnet` prints: where to call and a first request to try. */
export function devnetBanner(d: Devnet): string {
  const base = `http://127.0.0.1:${d.gateway.port}`;
  const ws = `ws://127.0.0.1:${d.gateway.port}`;
  const urls = chainUrls(d.config, 'devnet', d.demo.apiKey);
  return [
    '',
    'chaingate devnet is running',
    `  anvil (chain id ${DEVNET_CHAIN_ID}, 1-second blocks) at ${d.anvil.url}`,
    `  beacon node following it (a slot per block) at ${d.beacon.url}`,
    `  JSON-RPC, public:   ${base}/v1/rpc/public`,
    `  same, by path:      ${base}/devnet/v1/rpc/public`,
    `  WebSocket, public:  ${ws}/v1/rpc/public`,
    `  Beacon API, public: ${base}/devnet-beacon/v1/rpc/public/eth/v1/...`,
    '',
    'A demo owner (plan growth, 10,000,000 RU) and its endpoint, for private access:',
    `  endpoint HTTPS URL: ${urls.https}`,
    `  endpoint WSS URL:   ${urls.wss}`,
    `  management key:     ${d.demo.managementKey}`,
    `  try: curl -s -H 'Authorization: Bearer ${d.demo.managementKey}' ${base}/api/dashboard/account`,
    '',
    'Try:',
    `  curl -s -X POST -H 'content-type: application/json' \\`,
    `    -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' ${base}/v1/rpc/public`,
    `  curl -s ${base}/devnet-beacon/v1/rpc/public/eth/v1/beacon/headers/head`,
    `  curl -sN '${base}/devnet-beacon/v1/rpc/public/eth/v1/events?topics=head,block'`,
    `  npx wscat -c ${ws}/v1/rpc/public -x '{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}' -w 5`,
    '',
    'Ctrl-C stops the gateway, the beacon node and anvil.',
    '',
  ].join('\n');
}
