/**
 * Every default of the configuration, read from the schemas that declare them (one place per key, with
 * its unit in its description). config.example.yaml repeats these with the reason for each.
 */
import type { Static, TSchema } from './typebox.js';
import { ChainSchema, UpstreamSchema } from './chains.js';
import { ClusterSchema } from './storage.js';
import { FencesSchema } from './fences.js';
import { LedgerSchema, LogSchema, ManagementSchema, MetricsSchema, UsageSchema } from './operations.js';
import { PlansSchema, PublicSchema } from './plans.js';
import { RuSchema } from './ru.js';
import { fillDefaults } from './fill-defaults.js';
import { ServerSchema } from './server.js';
import { StorageSchema } from './storage.js';
import { CacheSchema, FiltersSchema, SseSchema, SubscriptionsSchema, WebsocketSchema } from './streaming.js';
import { TransactionsSchema } from './transactions.js';

export { ANSWER_TIMEOUT_FACTOR, RESERVED_SLUGS } from './chains.js';

/** A section as read with nothing written (an empty one, for a section only a fleet has): every key at its default. */
function defaultsOf<T extends TSchema>(schema: T): Static<T> {
  return fillDefaults(schema, schema.default === undefined ? {} : undefined, true) as Static<T>;
}

const ru = defaultsOf(RuSchema);

export const DEFAULTS = {
  server: defaultsOf(ServerSchema),
  storage: defaultsOf(StorageSchema),
  cluster: defaultsOf(ClusterSchema),
  chain: defaultsOf(ChainSchema),
  upstream: defaultsOf(UpstreamSchema),
  plans: defaultsOf(PlansSchema),
  management: defaultsOf(ManagementSchema),
  fences: defaultsOf(FencesSchema),
  public: defaultsOf(PublicSchema),
  ru: {
    default: ru.default,
    notification_per_250_bytes: ru.notification_per_250_bytes,
    beacon_default: ru.beacon.default,
    beacon_per_event: ru.beacon.per_event,
  },
  websocket: defaultsOf(WebsocketSchema),
  subscriptions: defaultsOf(SubscriptionsSchema),
  sse: defaultsOf(SseSchema),
  cache: defaultsOf(CacheSchema),
  filters: defaultsOf(FiltersSchema),
  transactions: defaultsOf(TransactionsSchema),
  ledger: defaultsOf(LedgerSchema),
  log: defaultsOf(LogSchema),
  metrics: defaultsOf(MetricsSchema),
  usage: defaultsOf(UsageSchema),
} as const;
