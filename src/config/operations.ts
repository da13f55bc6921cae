/**
 * The operations sections: the log, the metrics listener, the management listener and its rates, the
 * ledger's flush and the usage roll-up; and the rule that each extra listener has a port of its own.
 */
import type { Static } from './typebox.js';
import type { Errors } from './checks.js';
import { bool, int, num, oneOf, optionalInt, optionalText, Problem, section, text, unlessNoString } from './keys.js';
import type { ServerConfig } from './server.js';
import { LOG_LEVELS } from '../log.js';

export const LogSchema = section(
  {
    level: oneOf(LOG_LEVELS, 'info', 'The least level logged: debug, info, warn, error (CHAINGATE_LOG_LEVEL overrides it).'),
    access: bool(false, 'One line per request when true (journald grows by ~200 bytes a request).'),
    access_sample: num(0, 1, 1, 'With access: the share of requests logged, 0 to 1 (0.1: one in ten).'),
  },
  'The log: JSON lines on stdout.',
);

export const MetricsSchema = section(
  {
    enabled: bool(true, 'false: no metrics listener.'),
    host: text('127.0.0.1', 'The Prometheus listener: loopback unless the operator opens it.'),
    port: int(0, 65535, 9464, 'The port OpenTelemetry and many exporters use for Prometheus.'),
    token: optionalText('16 characters or more: scrapes then need Authorization: Bearer <token>; absent: none.', {
      minLength: 16,
      [Problem]: unlessNoString('at least 16 characters (it guards the exposition)'),
    }),
  },
  'Prometheus metrics: GET /metrics on a listener of its own (never the main one).',
);

export const ManagementSchema = section(
  {
    host: optionalText('Listen address of its own listener (only with port); default 127.0.0.1.'),
    port: optionalInt(0, 65535, 'A listener of its own on this port; absent: served on the main listener.'),
    rps_per_key: int(1, 1_000_000, 20, "Management requests per second of one owner's keys (a dashboard page makes a few)."),
    rps_per_ip: int(1, 1_000_000, 50, 'Management requests per second from one client IP, whatever the key.'),
  },
  'The management REST: a listener of its own with a port; the rates apply wherever it is served.',
);

export const LedgerSchema = section(
  {
    flush_interval_ms: int(10, 60_000, 200, 'Debits reach the store at most this late (ms); a kill -9 loses at most this much.'),
  },
  'Debits kept in memory and written with their usage rows in one transaction.',
);

export const UsageSchema = section(
  {
    keep_minutes_h: int(1, 24 * 365, 48, 'Hours of per-minute rows before they are rolled up into hours.'),
    keep_hours_d: int(1, 3650, 90, 'Days of hourly rows before they are rolled up into days (kept).'),
    failures_kept: int(1, 10_000, 100, "Recent failed calls kept per endpoint for its owner's failures list."),
  },
  'Usage statistics: per-minute rows, rolled up into hours, then days.',
);

/** The management listener, when it has a port of its own. */
export type ManagementListener = { host: string; port: number };
/** The metrics listener as the runtime reads it; undefined when `metrics.enabled` is false. */
export type MetricsConfig = Omit<Static<typeof MetricsSchema>, 'enabled'>;

/** Its own listener only when a port is given: the limits alone leave the API on the main listener. */
export function readManagement(
  m: Static<typeof ManagementSchema>,
  errors: Errors,
): { management: ManagementListener | undefined; management_limits: { rps_per_key: number; rps_per_ip: number } } {
  let management: ManagementListener | undefined;
  if (m.port !== undefined) management = { host: m.host ?? '127.0.0.1', port: m.port };
  else if (m.host !== undefined) errors.push('management.host: needs management.port (a listener of its own)');
  return { management, management_limits: { rps_per_key: m.rps_per_key, rps_per_ip: m.rps_per_ip } };
}

export function readMetrics(m: Static<typeof MetricsSchema>): MetricsConfig | undefined {
  return m.enabled ? { host: m.host, port: m.port, token: m.token } : undefined;
}

/** Addresses that take every interface, so they collide with any other host on the same port. */
const WILDCARD_HOSTS = new Set(['0.0.0.0', '::']);

/**
 * The management listener needs a port of its own. Port 0 (any free port) never collides; two distinct
 * specific addresses may share a port, a wildcard address shares it with nothing.
 */
export function checkManagementPort(server: ServerConfig, management: ManagementListener | undefined, errors: Errors): void {
  if (management === undefined || management.port === 0 || management.port !== server.port) return;
  const overlap = management.host === server.host || WILDCARD_HOSTS.has(management.host) || WILDCARD_HOSTS.has(server.host);
  if (overlap)
    errors.push(
      `management.port: ${management.port} is also server.port on ${server.host}; the management listener needs a port of its own`,
    );
}

/** The metrics listener needs a port of its own too (0, any free port, never collides). */
export function checkMetricsPort(
  server: ServerConfig,
  management: ManagementListener | undefined,
  metrics: MetricsConfig | undefined,
  errors: Errors,
): void {
  if (metrics === undefined || metrics.port === 0) return;
  const taken = [
    { name: 'server.port', host: server.host, port: server.port },
    ...(management ? [{ name: 'management.port', host: management.host, port: management.port }] : []),
  ];
  for (const other of taken) {
    if (other.port !== metrics.port) continue;
    if (metrics.host === other.host || WILDCARD_HOSTS.has(metrics.host) || WILDCARD_HOSTS.has(other.host))
      errors.push(`metrics.port: ${metrics.port} is also ${other.name} on ${other.host}; the metrics listener needs a port of its own`);
  }
}
