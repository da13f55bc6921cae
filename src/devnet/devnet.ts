import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { validateConfig, type Config } from '../config/schema.js';
import { chainUrls } from '../server/management.js';
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
  /** The demo owner made at start, with an endpoint on each devnet chain, so private access can be tried at once. */
  readonly demo: { ownerId: number; managementKey: string; endpoints: Readonly<Record<DevnetChain, DemoEndpoint>> };
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

/** The devnet's chains, by slug: anvil and the beacon node that follows it. */
export const DEVNET_CHAINS = ['devnet', 'devnet-beacon'] as const;
export type DevnetChain = (typeof DEVNET_CHAINS)[number];

export interface DemoEndpoint {
  endpointId: string;
  apiKey: string;
}

/**
 * The keyless path's limits on the devnet: meant for a test suite or a script on the same machine, which
 * the production defaults (10 requests/s per IP, batches of 10) would refuse within a second. `chaingate
 * serve` keeps the production defaults.
 */
export const DEVNET_PUBLIC_LIMITS = { rps_per_ip: 10_000, max_batch: 1000 } as const;

export function devnetConfig(anvil: AnvilNode, beaconUrl: string, port: number, host: string, dbPath: string): Config {
  const result = validateConfig({
    server: { host, port, default_chain: 'devnet' },
    storage: { path: dbPath },
    // Every method keyless, the heavy ones too (traces, txpool_content): the devnet is a local chain for tests
    // and scripts, where a trace costs nothing to anyone else.
    public: { ...DEVNET_PUBLIC_LIMITS, methods: { deny: [] } },
    // Any free port: a devnet beside a running daemon (which holds 9464) must still start.
    metrics: { host, port: 0 },
    chains: {
      devnet: {
        name: 'Local devnet',
        kind: 'evm',
        chain_id: DEVNET_CHAIN_ID,
        upstreams: [{ url: anvil.url, ws: anvil.wsUrl }],
        // Its safe and finalized blocks are the beacon node's checkpoints, one and two 32-slot epochs of 1-second
        // blocks behind the head (beacon/epochs.ts), known from the end of the first epoch (about 32 s in).
        beacon: 'devnet-beacon',
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
  // Steps tracing: the devnet serves debug_trace*, whose struct logs are empty without it.
  const anvil = await startAnvil({ chainId: DEVNET_CHAIN_ID, blockTime: opts.blockTime ?? 1, stepsTracing: true, ownProcessGroup: true });
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
  const owner = await tenancy.accounts.createOwner('demo', 'growth', 10_000_000);
  const demoEndpoint = async (network: DevnetChain): Promise<DemoEndpoint> => {
    const made = await tenancy.accounts.createEndpoint(owner.id, network, 'demo', config.plans.growth?.max_endpoints ?? 50);
    switch (made.kind) {
      case 'created':
        return { endpointId: made.endpoint.id, apiKey: made.apiKey };
      case 'refused':
        throw new Error(`devnet: cannot create the demo endpoint on ${network} (${made.error})`);
      default:
        return made satisfies never;
    }
  };
  const endpoints = { devnet: await demoEndpoint('devnet'), 'devnet-beacon': await demoEndpoint('devnet-beacon') };
  return {
    anvil,
    beacon,
    gateway,
    config,
    demo: { ownerId: owner.id, managementKey: owner.managementKey, endpoints },
    async stop() {
      await gateway.stop();
      await beacon.stop();
      await anvil.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A WebSocket subscription to try, with what a fresh install has: node and the `ws` package the project
 * depends on (npx would download a package first, which fails offline). NODE_PATH names the folder `ws`
 * is installed in, so the line works from any directory, not only inside the repository.
 */
function subscribeExample(wsUrl: string): string {
  const request = '{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}';
  const modules = dirname(dirname(createRequire(import.meta.url).resolve('ws')));
  return (
    `NODE_PATH='${modules.replaceAll("'", "'\\''")}' node -e "const s=new (require('ws'))('${wsUrl}');s.on('open',()=>s.send('${request.replaceAll('"', '\\"')}'));` +
    `s.on('message',(m)=>console.log(String(m)))"`
  );
}

/** `HTTPS URL:` or `HTTP URL:`, `WSS URL:` or `WS URL:`: the label of a URL says the scheme it has. */
const urlLabel = (url: string): string => `${url.slice(0, url.indexOf(':')).toUpperCase()} URL:`;

/** What `chaingate devnet` prints: where to call and a first request to try. */
export function devnetBanner(d: Devnet): string {
  const base = `http://127.0.0.1:${d.gateway.port}`;
  const ws = `ws://127.0.0.1:${d.gateway.port}`;
  const evm = chainUrls(d.config, 'devnet', d.demo.endpoints.devnet.apiKey);
  const beacon = chainUrls(d.config, 'devnet-beacon', d.demo.endpoints['devnet-beacon'].apiKey);
  const { rps_per_ip: rps, max_batch: batch } = d.config.public;
  return [
    '',
    'chaingate devnet is running',
    `  anvil (chain id ${DEVNET_CHAIN_ID}, 1-second blocks) at ${d.anvil.url}`,
    `  beacon node following it (a slot per block) at ${d.beacon.url}`,
    `  JSON-RPC, public:   ${base}/v1/rpc/public`,
    `  same, by path:      ${base}/devnet/v1/rpc/public`,
    `  WebSocket, public:  ${ws}/v1/rpc/public`,
    `  Beacon API, public: ${base}/devnet-beacon/v1/rpc/public/eth/v1/...`,
    `  Prometheus metrics: http://127.0.0.1:${d.gateway.metricsPort}/metrics`,
    `  The public path allows ${rps.toLocaleString('en-US')} requests/s per IP and batches of ${batch.toLocaleString('en-US')}: devnet`,
    '  limits for local development (chaingate serve defaults to 10 requests/s and batches of 10).',
    '',
    'A demo owner (plan growth, 10,000,000 RU) with an endpoint on each devnet chain, for private access:',
    `  endpoint ${urlLabel(evm.https).padEnd(11)}${evm.https}`,
    `  endpoint ${urlLabel(evm.wss!).padEnd(11)}${evm.wss}`,
    `  Beacon endpoint:    ${beacon.https}/eth/v1/...`,
    `  management key:     ${d.demo.managementKey}`,
    `  try: curl -s -H 'Authorization: Bearer ${d.demo.managementKey}' ${base}/api/dashboard/account`,
    `  dashboard:          ${base}/dashboard (sign in with the management key)`,
    '',
    'Try:',
    `  curl -s -X POST -H 'content-type: application/json' \\`,
    `    -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' ${base}/v1/rpc/public`,
    `  curl -s ${beacon.https}/eth/v1/beacon/headers/head`,
    `  curl -sN '${base}/devnet-beacon/v1/rpc/public/eth/v1/events?topics=head,block'`,
    `  ${subscribeExample(`${ws}/v1/rpc/public`)}`,
    '',
    'Ctrl-C stops the gateway, the beacon node and anvil.',
    '',
  ].join('\n');
}
