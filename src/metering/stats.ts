import type { UsageFigures, UsageStats } from '../api-answers.js';
import { LATENCY_COLUMNS } from '../store/latency-columns.js';
import type { Statements, StatsRow } from '../store/statements.js';
import { emptyLatency, type LatencyCounts, latencySummary } from './latency-histogram.js';

export type StatsInterval = 'minute' | 'hour' | 'day';

export interface StatsQuery {
  /** Only this endpoint's usage; all the owner's endpoints (deleted ones included) when absent. */
  endpointId?: string | undefined;
  /** Only this JSON-RPC method's (or Beacon route's) usage, for its own series; every method when absent. */
  method?: string | undefined;
  /** Unix seconds, inclusive: a row counts when the period it covers starts in [from, to). */
  from: number;
  /** Unix seconds, exclusive. */
  to: number;
  /** Width of one point of `series`. */
  interval: StatsInterval;
}

export const INTERVAL_SECONDS: Readonly<Record<StatsInterval, number>> = { minute: 60, hour: 3600, day: 86_400 };

/**
 * Reads one owner's usage from the minute, hour and day tables together: a roll-up moves rows from
 * one table to the next in one transaction, so every request is in exactly one of them.
 */
export function readUsageStats(sql: Statements, ownerId: number, query: StatsQuery): UsageStats {
  const rows = sql.directory.stats.all({
    step: INTERVAL_SECONDS[query.interval],
    owner: ownerId,
    from: query.from,
    to: query.to,
    endpoint: query.endpointId ?? null,
    method: query.method ?? null,
  });
  return summarizeUsage(rows);
}

/** Figures being added up: the API's, with the latency histogram not yet read into percentiles. */
interface Sums {
  requests: number;
  ru: number;
  errors: number;
  latency: LatencyCounts;
}

const sums = (): Sums => ({ requests: 0, ru: 0, errors: 0, latency: emptyLatency() });

/** The API's figures of some sums: the success rate and the latency percentiles read from the merged histogram. */
function figures(s: Sums): UsageFigures {
  return {
    requests: s.requests,
    ru: s.ru,
    errors: s.errors,
    success_rate: s.requests === 0 ? null : Math.round(((s.requests - s.errors) / s.requests) * 10_000) / 10_000,
    latency_ms: latencySummary(s.latency),
  };
}

/**
 * Totals, methods, series and statuses from the rows of a stats query (per period start, method and
 * status, ordered by period start), whichever engine read them. The latency is the successes' (status 0):
 * a refusal answered in microseconds says nothing of how fast calls are served.
 */
export function summarizeUsage(rows: readonly StatsRow[]): UsageStats {
  const totals = sums();
  const methods = new Map<string, Sums>();
  const series: Array<{ t: number; sums: Sums }> = [];
  const statuses = new Map<number, number>();
  const add = (to: Sums, row: StatsRow, errors: number): void => {
    to.requests += row.requests;
    to.ru += row.ru;
    to.errors += errors;
    if (errors === 0) for (let i = 0; i < LATENCY_COLUMNS.length; i++) to.latency[i]! += row[LATENCY_COLUMNS[i]!] ?? 0;
  };
  for (const row of rows) {
    const errors = row.status === 0 ? 0 : row.requests;
    if (errors > 0) statuses.set(row.status, (statuses.get(row.status) ?? 0) + errors);
    add(totals, row, errors);
    let m = methods.get(row.method);
    if (m === undefined) methods.set(row.method, (m = sums()));
    add(m, row, errors);
    // Rows arrive ordered by bucket, so a bucket's rows are adjacent.
    let last = series[series.length - 1];
    if (last === undefined || last.t !== row.bucket) series.push((last = { t: row.bucket, sums: sums() }));
    add(last.sums, row, errors);
  }
  const byRu = [...methods]
    .map(([method, m]) => ({ method, ...figures(m) }))
    .sort((a, b) => b.ru - a.ru || b.requests - a.requests || (a.method < b.method ? -1 : 1));
  const byCount = [...statuses]
    .map(([status, requests]) => ({ status, requests }))
    .sort((a, b) => b.requests - a.requests || a.status - b.status);
  return { totals: figures(totals), methods: byRu, series: series.map((p) => ({ t: p.t, ...figures(p.sums) })), statuses: byCount };
}
