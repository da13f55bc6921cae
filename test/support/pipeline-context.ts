/**
 * A GatewayContext built by hand for the pipeline's unit tests, without a listener: the real tenancy
 * on a temp SQLite file (its rate limiter and unknown-key guard driven by a test clock), and the
 * configured chains' runtimes, whose health checks are not started, so every upstream stays in
 * rotation and no head is known until a test reports one. Everything is closed at teardown.
 */
import { createConnectionCap } from '../../src/limits/connection-cap.js';
import type { Test } from 'tap';
import { textLogger } from './log-lines.js';
import { validateConfig } from '../../src/config/schema.js';
import { createSlidingWindowLimiter } from '../../src/limits/sliding-window.js';
import { createUnknownKeyGuard } from '../../src/limits/unknown-keys.js';
import type { Caller } from '../../src/pipeline/admission.js';
import { tallyFor } from '../../src/pipeline/answers.js';
import { createTenancy } from '../../src/pipeline/tenancy.js';
import { createRepeatedLog } from '../../src/repeated-log.js';
import { createMetrics } from '../../src/metrics/registry.js';
import type { GatewayContext } from '../../src/pipeline/context.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { type ChainRuntime, createChainRuntime } from '../../src/chain/runtime.js';
import { createResponseCache } from '../../src/chain/response-cache.js';
import { tempDbPath } from '../store/temp-store.js';

export interface PipelineSetup {
  ctx: GatewayContext;
  /** The limiter's and the unknown-key guard's clock, in ms: tests move it instead of sleeping. */
  clock: { now: number };
  /** Every log line written (`level message key=value ...`). */
  logLines: string[];
  chain(slug: string): ChainRuntime;
}

/** Builds the context from `raw` config (storage and the public path's limits filled in unless given). */
export function pipelineContext(t: Test, raw: Record<string, unknown>): PipelineSetup {
  const r = validateConfig({
    public: { rps_per_ip: 10_000_000, max_batch: 1000 },
    storage: { path: tempDbPath(t) },
    ...raw,
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  const config = r.config;
  const logLines: string[] = [];
  const log = textLogger(logLines);
  const clock = { now: 1_000_000 };
  const tenancy = {
    ...createTenancy(config, log),
    limiter: createSlidingWindowLimiter({ now: () => clock.now }),
    unknownKeys: createUnknownKeyGuard({ now: () => clock.now }),
  };
  const chains = new Map<string, ChainRuntime>();
  // As the gateway builds them (server/gateway-thread.ts), less the prober, the feeds' log and subscription metering.
  const chainOpts = {
    log,
    responseCache: createResponseCache(config.cache.max_bytes),
    filters: config.filters,
    stopping: () => ctx.stopping,
  };
  for (const c of Object.values(config.chains)) chains.set(c.slug, createChainRuntime(c, chainOpts));
  const upstreamFailures = createRepeatedLog(log);
  const failedAnswers = createRepeatedLog(log);
  const ctx: GatewayContext = {
    config,
    chains,
    log,
    upstreamFailures,
    failedAnswers,
    connections: createConnectionCap(1_000_000),
    tenancy,
    metrics: createMetrics({ defaults: false }),
    corsOrigin: () => undefined,
    now: () => clock.now,
    inFlight: 0,
    stopping: false,
    onIdle: null,
  };
  t.teardown(() => {
    ctx.stopping = true;
    upstreamFailures.close();
    failedAnswers.close();
    for (const c of chains.values()) c.close();
    tenancy.close();
  });
  return {
    ctx,
    clock,
    logLines,
    chain(slug) {
      const c = chains.get(slug);
      if (c === undefined) throw new Error(`no chain ${slug}`);
      return c;
    },
  };
}

/** An owner with `ru` credit, one endpoint on `network`, and the Caller its key resolves to. */
export function keyedCaller(
  s: PipelineSetup,
  network: string,
  opts: { plan?: string; ru?: number; name?: string } = {},
): { caller: Caller; ownerId: number; apiKey: string } {
  const { tenancy, config } = s.ctx;
  const plan = opts.plan ?? 'free';
  const owner = createOwnerAdmin(tenancy.store!).createOwner(
    opts.name ?? `owner${Math.random().toString(36).slice(2, 8)}`,
    plan,
    opts.ru ?? 1_000_000,
  );
  const made = tenancy.directory!.createEndpoint(owner.id, network, undefined, 100);
  if ('error' in made) throw new Error(`createEndpoint refused: ${made.error}`);
  const auth = tenancy.directory!.endpointByKey(made.apiKey)!;
  const planConfig = config.plans[plan] ?? null;
  return {
    ownerId: owner.id,
    apiKey: made.apiKey,
    caller: {
      auth,
      key: made.apiKey,
      plan: planConfig,
      limitKey: `ep:${auth.endpointId}`,
      rps: planConfig?.rps ?? 1,
      maxBatch: config.server.max_batch,
      // A network the config no longer has (a test of that refusal) counts on the first chain.
      tally: tallyFor(s.ctx, s.ctx.chains.get(network) ?? [...s.ctx.chains.values()][0]!, 'http', made.apiKey),
    },
  };
}

/** The public path's Caller for `ip`, as resolveCaller makes it. */
export function publicCaller(s: PipelineSetup, ip = '192.0.2.1'): Caller {
  const { config } = s.ctx;
  return {
    auth: null,
    key: null,
    plan: null,
    limitKey: `ip:${ip}`,
    rps: config.public.rps_per_ip,
    maxBatch: Math.min(config.public.max_batch, config.server.max_batch),
    tally: tallyFor(s.ctx, s.ctx.chains.values().next().value!, 'http', null),
  };
}

/** The usage the ledger has written (flushing first), summed over minutes, in a stable order. */
export function usageRows(
  s: PipelineSetup,
): Array<{ owner_id: number; endpoint_id: string; method: string; status: number; requests: number; ru: number }> {
  const { tenancy } = s.ctx;
  if (!tenancy.ledger.flush()) throw new Error('the ledger flush failed');
  return tenancy
    .store!.db.prepare(`
    SELECT owner_id, endpoint_id, method, status, sum(requests) AS requests, sum(ru) AS ru FROM usage_minute
    GROUP BY owner_id, endpoint_id, method, status ORDER BY owner_id, endpoint_id, method, status`)
    .all() as never;
}

/** The owner's balance as stored in SQLite (flushing first). */
export function storedBalance(s: PipelineSetup, ownerId: number): number {
  const { tenancy } = s.ctx;
  if (!tenancy.ledger.flush()) throw new Error('the ledger flush failed');
  return tenancy.store!.sql.ledger.balance.get(ownerId)!;
}
