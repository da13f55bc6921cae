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

/** The embedded devnet: anvil with 1-second blocks and the gateway in front of it as chain `devnet`. */
export interface Devnet {
  readonly anvil: AnvilNode;
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

export function devnetConfig(anvil: AnvilNode, port: number, host: string, dbPath: string): Config {
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
  // The devnet's chain starts empty every time, and so does its database: keys printed are this run's.
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-devnet-'));
  const config = devnetConfig(anvil, port, host, join(dir, 'devnet.db'));
  let gateway: Gateway;
  try {
    gateway = await startGateway(config, { log: opts.log, port });
  } catch (err) {
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
    gateway,
    config,
    demo: { ownerId: owner.id, managementKey: owner.managementKey, endpointId: made.endpoint.id, apiKey: made.apiKey },
    async stop() {
      await gateway.stop();
      await anvil.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** What `chaingate devnet` prints: where to call and a first request to try. */
export function devnetBanner(d: Devnet): string {
  const base = `http://127.0.0.1:${d.gateway.port}`;
  const urls = chainUrls(d.config, 'devnet', d.demo.apiKey);
  return [
    '',
    'chaingate devnet is running',
    `  anvil (chain id ${DEVNET_CHAIN_ID}, 1-second blocks) at ${d.anvil.url}`,
    `  JSON-RPC, public:   ${base}/v1/rpc/public`,
    `  same, by path:      ${base}/devnet/v1/rpc/public`,
    '',
    'A demo owner (plan growth, 10,000,000 RU) and its endpoint, for private access:',
    `  endpoint HTTPS URL: ${urls.https}`,
    `  management key:     ${d.demo.managementKey}`,
    `  try: curl -s -H 'Authorization: Bearer ${d.demo.managementKey}' ${base}/api/dashboard/account`,
    '',
    'Try:',
    `  curl -s -X POST -H 'content-type: application/json' \\`,
    `    -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' ${base}/v1/rpc/public`,
    '',
    'Ctrl-C stops the gateway and anvil.',
    '',
  ].join('\n');
}
