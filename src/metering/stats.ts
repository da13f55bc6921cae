import type { UsageFigures, UsageStats } from '../api-answers.js';
import type { Statements, StatsRow } from '../store/statements.js';

export type StatsInterval = 'minute' | 'hour' | 'day';

export interface StatsQuery {
  /** Only this endpoint's usage; all the owner's endpoints (deleted ones included) when absent. */
  endpointId?: string | undefined;
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
  });
  return summarizeUsage(rows);
}

/**
 * Totals, methods, series and statuses from the rows of a stats query (per period start, method and
 * status, ordered by period start), whichever engine read them.
 */
export function summarizeUsage(rows: readonly StatsRow[]): UsageStats {
  const totals: UsageFigures = { requests: 0, ru: 0, errors: 0 };
  const methods = new Map<string, UsageFigures & { method: string }>();
  const series: Array<UsageFigures & { t: number }> = [];
  const statuses = new Map<number, number>();
  const add = (to: UsageFigures, row: StatsRow, errors: number): void => {
    to.requests += row.requests;
    to.ru += row.ru;
    to.errors += errors;
  };
  for (const row of rows) {
    const errors = row.status === 0 ? 0 : row.requests;
    if (errors > 0) statuses.set(row.status, (statuses.get(row.status) ?? 0) + errors);
    add(totals, row, errors);
    let m = methods.get(row.method);
    if (m === undefined) methods.set(row.method, (m = { method: row.method, requests: 0, ru: 0, errors: 0 }));
    add(m, row, errors);
    // Rows arrive ordered by bucket, so a bucket's rows are adjacent.
    let last = series[series.length - 1];
    if (last === undefined || last.t !== row.bucket) series.push((last = { t: row.bucket, requests: 0, ru: 0, errors: 0 }));
    add(last, row, errors);
  }
  const byRu = [...methods.values()].sort((a, b) => b.ru - a.ru || b.requests - a.requests || (a.method < b.method ? -1 : 1));
  const byCount = [...statuses]
    .map(([status, requests]) => ({ status, requests }))
    .sort((a, b) => b.requests - a.requests || a.status - b.status);
  return { totals, methods: byRu, series, statuses: byCount };
}
