import type { Config } from '../config/schema.js';

/** The public URLs of a chain: `server.public_base_url` with `{chain}` filled, then the key path. */
export function chainUrls(config: Config, slug: string, keySegment: string): { https: string; wss: string | null } {
  const base = config.server.public_base_url.replace('{chain}', slug);
  const https = `${base}/v1/rpc/${keySegment}`;
  const wss = config.chains[slug]?.kind === 'evm' ? https.replace(/^http/, 'ws') : null;
  return { https, wss };
}
