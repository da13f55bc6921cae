/**
 * The whole configuration: each section's schema (declared in the file named after it) put together,
 * the Config type the rest of src/ reads, and validateConfig, which reports every error at once, each
 * with its key path: first what each key's declaration refuses, then the rules across keys.
 */
import { type Static, Type } from './typebox.js';
import { type Errors, isObject } from './checks.js';
import { type ChainConfig, ChainsSchema, checkBeaconLinks, checkChainIds, readChains } from './chains.js';
import { type ClusterConfig, ClusterSchema, readStorage, type StorageConfig, StorageSchema } from './storage.js';
import {
  checkManagementPort,
  checkMetricsPort,
  LedgerSchema,
  LogSchema,
  type ManagementListener,
  ManagementSchema,
  MetricsSchema,
  type MetricsConfig,
  readManagement,
  readMetrics,
  UsageSchema,
} from './operations.js';
import { FencesSchema } from './fences.js';
import { WebhooksSchema } from './webhooks.js';
import { namePlans, type PlanConfig, PlansSchema, PublicSchema, readPublic } from './plans.js';
import { checkRu, type RuConfig, RuSchema } from './ru.js';
import { withoutNulls } from './fill-defaults.js';
import { checkSchema } from './schema-check.js';
import { readServer, type ServerConfig, ServerSchema } from './server.js';
import { CacheSchema, FiltersSchema, SseSchema, SubscriptionsSchema, WebsocketSchema } from './streaming.js';
import { type TracingConfig, TracingSchema } from './tracing.js';
import { TransactionsSchema } from './transactions.js';

export type { ChainConfig, UpstreamConfig } from './chains.js';
export type { ChainRu, MethodDeny, MethodRules } from './method-policy.js';
export type { PlanConfig } from './plans.js';
export type { ServerConfig } from './server.js';
export type { ClusterConfig, StorageConfig } from './storage.js';
export { MAX_WORKERS } from './server.js';
export { readPlans } from './plans.js';

/** The config file: its sections in the order config.example.yaml shows them; an unknown one is refused. */
export const ConfigSchema = Type.Object(
  {
    server: ServerSchema,
    storage: StorageSchema,
    cluster: Type.Optional(ClusterSchema),
    chains: ChainsSchema,
    plans: PlansSchema,
    public: PublicSchema,
    ru: RuSchema,
    ledger: LedgerSchema,
    usage: UsageSchema,
    management: ManagementSchema,
    fences: FencesSchema,
    webhooks: WebhooksSchema,
    websocket: WebsocketSchema,
    subscriptions: SubscriptionsSchema,
    sse: SseSchema,
    cache: CacheSchema,
    filters: FiltersSchema,
    transactions: TransactionsSchema,
    log: LogSchema,
    metrics: MetricsSchema,
    tracing: TracingSchema,
  },
  { additionalProperties: false, title: 'chaingate configuration' },
);

/** The configuration as the gateway reads it: every default filled in, what depends on other keys derived. */
export interface Config {
  server: ServerConfig;
  storage: StorageConfig;
  /** Set in a fleet (with storage.url): what the instances share besides the store. */
  cluster: ClusterConfig | undefined;
  chains: Record<string, ChainConfig>;
  plans: Record<string, PlanConfig>;
  /** The keyless path: its rates, its batch size, and the methods it may not call. */
  public: Static<typeof PublicSchema>;
  ru: RuConfig;
  websocket: Static<typeof WebsocketSchema>;
  subscriptions: Static<typeof SubscriptionsSchema>;
  sse: Static<typeof SseSchema>;
  cache: Static<typeof CacheSchema>;
  filters: Static<typeof FiltersSchema>;
  transactions: Static<typeof TransactionsSchema>;
  ledger: Static<typeof LedgerSchema>;
  usage: Static<typeof UsageSchema>;
  /** A separate listener for the management REST; undefined: served on the main listener. */
  management: ManagementListener | undefined;
  /** Request rates of the management REST, wherever it is served (the `management` section's other keys). */
  management_limits: { rps_per_key: number; rps_per_ip: number };
  /** The operator's choices for every endpoint's restrictions. */
  fences: Static<typeof FencesSchema>;
  /** Owners' webhooks: what the operator allows, and how they are sent. */
  webhooks: Static<typeof WebhooksSchema>;
  log: Static<typeof LogSchema>;
  /** The Prometheus listener; undefined when `metrics.enabled` is false. */
  metrics: MetricsConfig | undefined;
  /** OpenTelemetry traces; off while otlp_endpoint is absent. */
  tracing: TracingConfig;
}

/** Only what each key's declaration refuses, each with its key path: what chaingate.schema.json checks in an editor. */
export function schemaProblems(raw: unknown): string[] {
  const errors: Errors = [];
  checkSchema(ConfigSchema, withoutNulls(ConfigSchema, raw ?? {}), '', errors);
  return errors;
}

/** Validates a parsed YAML document; returns the config or every error found, each with its key path. */
export function validateConfig(raw: unknown): { ok: true; config: Config } | { ok: false; errors: string[] } {
  if (raw !== undefined && raw !== null && !isObject(raw)) return { ok: false, errors: ['(top level): must be a mapping'] };
  const errors: Errors = [];
  const given = withoutNulls(ConfigSchema, raw ?? {}) as Record<string, unknown>;
  const c = checkSchema(ConfigSchema, given, '', errors);
  const chains = readChains(c.chains, given.chains, errors);
  const server = readServer(c.server, chains, errors);
  const { storage, cluster } = readStorage(c.storage, c.cluster, given, server.port, errors);
  if (cluster !== undefined && typeof server.workers === 'number' && server.workers > 1)
    errors.push(
      'server.workers: an instance of a fleet (storage.url) runs one thread: run one instance per core behind the load balancer instead',
    );
  const plans = namePlans(c.plans, errors);
  const publicPath = readPublic(c.public, errors);
  const { management, management_limits } = readManagement(c.management, errors);
  const metrics = readMetrics(c.metrics);
  checkRu(c.ru, errors);
  checkChainIds(chains, errors);
  checkBeaconLinks(chains, errors);
  // Spending stops a flush interval before the last renewal may have expired: a TTL within two intervals leaves no time to spend.
  if (cluster !== undefined && cluster.reservation_ttl_s * 1000 < 2 * c.ledger.flush_interval_ms)
    errors.push(
      `cluster.reservation_ttl_s: at least twice ledger.flush_interval_ms (${c.ledger.flush_interval_ms} ms), which renews the reservations`,
    );
  checkManagementPort(server, management, errors);
  checkMetricsPort(server, management, metrics, errors);
  if (errors.length > 0) return { ok: false, errors };
  const config: Config = {
    server,
    storage,
    cluster,
    chains,
    plans,
    public: publicPath,
    ru: c.ru,
    ledger: c.ledger,
    usage: c.usage,
    management,
    management_limits,
    fences: c.fences,
    webhooks: c.webhooks,
    websocket: c.websocket,
    subscriptions: c.subscriptions,
    sse: c.sse,
    cache: c.cache,
    filters: c.filters,
    transactions: c.transactions,
    log: c.log,
    metrics,
    tracing: c.tracing,
  };
  return { ok: true, config };
}
