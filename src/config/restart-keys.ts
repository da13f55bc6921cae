import type { Config } from './schema.js';

/**
 * What a reload cannot apply: the listeners already bound and the store already open. Each entry reads
 * the value a config holds there; two configs that differ in one of them differ in a way only a restart
 * applies. TLS certificate files are not here: a reload reads them again (certificate renewals).
 */
const FIXED: ReadonlyArray<readonly [string, (c: Config) => unknown]> = [
  ['server.host', (c) => c.server.host],
  ['server.port', (c) => c.server.port],
  ['server.tls', (c) => c.server.tls !== undefined],
  ['server.workers', (c) => c.server.workers],
  ['server.max_connections', (c) => c.server.max_connections],
  ['server.worker_max_heap_mb', (c) => c.server.worker_max_heap_mb],
  ['server.worker_stall_s', (c) => c.server.worker_stall_s],
  ['server.worker_relay_max_bytes', (c) => c.server.worker_relay_max_bytes],
  ['storage.path', (c) => c.storage.path],
  ['storage.reserve_bytes', (c) => c.storage.reserve_bytes],
  ['storage.url', (c) => c.storage.url],
  ['cluster.redis_url', (c) => c.cluster?.redis_url],
  ['cluster.instance', (c) => c.cluster?.instance],
  ['cluster.reservation_ttl_s', (c) => c.cluster?.reservation_ttl_s],
  ['cluster.reservation_block_ru', (c) => c.cluster?.reservation_block_ru],
  ['cluster.redis_failure', (c) => c.cluster?.redis_failure],
  // Compiled into every cached grant: a reload would leave the keys already looked up as they were.
  ['fences.contracts_cover_balance', (c) => c.fences.contracts_cover_balance],
  // The alerts' timer is set once, at start (the other webhooks keys are read at each check or request).
  ['webhooks.check_interval_s', (c) => c.webhooks.check_interval_s],
  ['management.host', (c) => c.management?.host],
  ['management.port', (c) => c.management?.port],
  ['metrics.enabled', (c) => c.metrics !== undefined],
  ['metrics.host', (c) => c.metrics?.host],
  ['metrics.port', (c) => c.metrics?.port],
  ['metrics.token', (c) => c.metrics?.token],
];

// A collector's URL may hold credentials, as the store's may.
const SECRET: ReadonlySet<string> = new Set(['metrics.token', 'storage.url', 'cluster.redis_url']);

const shown = (v: unknown): string => (v === undefined ? '(none)' : typeof v === 'boolean' ? (v ? 'on' : 'off') : String(v));

/**
 * The changes from `running` to `next` that only a restart applies, one message each naming its key;
 * empty when a reload can apply the whole file. A secret (the metrics token) is never shown.
 */
export function restartOnlyChanges(running: Config, next: Config): string[] {
  const out: string[] = [];
  for (const [key, read] of FIXED) {
    const [was, now] = [read(running), read(next)];
    if (was === now) continue;
    // A secret is never shown: the token, and URLs that may hold a password.
    const change = SECRET.has(key) ? 'changed' : `${shown(was)} → ${shown(now)}`;
    out.push(`${key}: applies only on a restart (${change}); restart chaingate, or put it back to reload the rest`);
  }
  return out;
}
