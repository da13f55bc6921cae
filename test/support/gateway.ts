/** Starts a real gateway in this test process, on port 0, and stops it at teardown. */
import type { Test } from 'tap';
import { textLogger } from './log-lines.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig } from '../../src/config/schema.js';
import type { Logger } from '../../src/log.js';
import type { ProberOptions } from '../../src/upstreams/prober.js';
import { startGateway, type Gateway } from '../../src/server/app.js';
import { type AnvilNode, startAnvil, type AnvilOptions } from '../../src/devnet/anvil.js';

export interface TestGateway {
  gateway: Gateway;
  base: string;
  logLines: string[];
}

/**
 * The public path's per-IP limit and the management API's rates are lifted unless a test sets them:
 * every test client shares 127.0.0.1, and only the tests of limits are about limits. The database is
 * a fresh temp file. The main listener takes any free port, or the `server.port` a test names (one
 * whose public URLs, built from the port, must work).
 */
export async function gatewayFor(
  t: Test,
  raw: Record<string, unknown>,
  opts: { ca?: string | Buffer; prober?: ProberOptions } = {},
): Promise<TestGateway> {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-test-'));
  const r = validateConfig({
    public: { rps_per_ip: 10_000_000, max_batch: 1000 },
    storage: { path: join(dir, 'chaingate.db') },
    ...raw,
    management: { rps_per_key: 1_000_000, rps_per_ip: 1_000_000, ...(raw.management as object | undefined) },
    server: { host: '127.0.0.1', port: 0, stop_timeout_s: 2, ...(raw.server as object | undefined) },
    // Any free port: tests run side by side, and the default 9464 would be shared.
    metrics: { port: 0, ...(raw.metrics as object | undefined) },
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  const logLines: string[] = [];
  const log: Logger = textLogger(logLines);
  const port = (raw.server as { port?: number } | undefined)?.port ?? 0;
  const gateway = await startGateway(r.config, {
    log,
    port,
    ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
    ...(opts.prober !== undefined ? { prober: opts.prober } : {}),
  });
  t.teardown(async () => {
    await gateway.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const scheme = r.config.server.tls ? 'https' : 'http';
  return { gateway, base: `${scheme}://127.0.0.1:${gateway.port}`, logLines };
}

export async function anvilFor(t: Test, opts: AnvilOptions = {}): Promise<AnvilNode> {
  const node = await startAnvil(opts);
  t.teardown(() => node.stop());
  return node;
}

/** A single-chain evm config in front of the given upstream URLs. */
export function evmChain(urls: string[], chainId = 31337, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { chain_id: chainId, upstreams: urls.map((url) => ({ url })), ...extra };
}
