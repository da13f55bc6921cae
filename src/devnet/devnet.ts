import { validateConfig, type Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import { startGateway, type Gateway } from '../server/app.js';
import { type AnvilNode, startAnvil } from './anvil.js';

/** The embedded devnet: anvil with 1-second blocks and the gateway in front of it as chain `devnet`. */
export interface Devnet {
  readonly anvil: AnvilNode;
  readonly gateway: Gateway;
  readonly config: Config;
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

export function devnetConfig(anvil: AnvilNode, port: number, host: string): Config {
  const result = validateConfig({
    server: { host, port, default_chain: 'devnet' },
    storage: { path: './data/devnet.db' },
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

export async function startDevnet(opts: DevnetOptions): Promise<Devnet> {
  const host = opts.host ?? '127.0.0.1';
  const anvil = await startAnvil({ chainId: DEVNET_CHAIN_ID, blockTime: opts.blockTime ?? 1 });
  const config = devnetConfig(anvil, opts.port, host);
  let gateway: Gateway;
  try {
    gateway = await startGateway(config, { log: opts.log, port: opts.port });
  } catch (err) {
    await anvil.stop();
    throw new Error(`port ${opts.port} on ${host} is taken: stop what uses it or choose another with --port`, { cause: err });
  }
  return {
    anvil,
    gateway,
    config,
    async stop() {
      await gateway.stop();
      await anvil.stop();
    },
  };
}

/** What `chaingate devnet` prints: where to call and a first request to try. */
export function devnetBanner(d: Devnet): string {
  const base = `http://127.0.0.1:${d.gateway.port}`;
  return [
    '',
    'chaingate devnet is running',
    `  anvil (chain id ${DEVNET_CHAIN_ID}, 1-second blocks) at ${d.anvil.url}`,
    `  JSON-RPC, public:   ${base}/v1/rpc/public`,
    `  same, by path:      ${base}/devnet/v1/rpc/public`,
    '',
    'Try:',
    `  curl -s -X POST -H 'content-type: application/json' \\`,
    `    -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' ${base}/v1/rpc/public`,
    '',
    'Ctrl-C stops the gateway and anvil.',
    '',
  ].join('\n');
}
