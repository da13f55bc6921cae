import type { Store } from '../store/open.js';

export interface RollUpOptions {
  /** Hours of per-minute rows kept before they are summed into hours (config `usage.keep_minutes_h`). */
  keepMinutesH: number;
  /** Days of hourly rows kept before they are summed into days, which are kept (config `usage.keep_hours_d`). */
  keepHoursD: number;
  /** Failures kept per endpoint (config `usage.failures_kept`), for the stores that write them; default 100. */
  failuresKept?: number;
}

/** Rows moved by one `rollUp`. */
export interface RollUpResult {
  minuteRows: number;
  hourRows: number;
}

/** Coarsens old usage so the tables stay small while totals stay exact. */
export interface UsageRollUp {
  /**
   * Sums minute rows older than the minute retention into hour rows, and hour rows older than the
   * hour retention into day rows, each move in one transaction (a reader sees a request in exactly
   * one table). Only whole periods move: the cut-offs are rounded down to an hour and to a day.
   * `nowMs` defaults to Date.now(); throws the SqliteError when the store fails (call again later).
   */
  rollUp(nowMs?: number): RollUpResult;
}

export function createUsageRollUp(store: Store, options: RollUpOptions): UsageRollUp {
  const sql = store.sql.usage;
  const moveMinutes = store.writeTransaction((cutoff: number) => {
    sql.minutesIntoHours.run(cutoff);
    return sql.deleteMinutesBefore.run(cutoff).changes;
  });
  const moveHours = store.writeTransaction((cutoff: number) => {
    sql.hoursIntoDays.run(cutoff);
    return sql.deleteHoursBefore.run(cutoff).changes;
  });

  return {
    rollUp(nowMs = Date.now()) {
      const cutoffs = rollUpCutoffs(nowMs, options);
      return { minuteRows: moveMinutes(cutoffs.minutes), hourRows: moveHours(cutoffs.hours) };
    },
  };
}

/**
 * Where a roll-up at `nowMs` cuts, in unix seconds: minute rows before `minutes` (a whole hour) go into
 * hours, hour rows before `hours` (a whole day) into days.
 */
export function rollUpCutoffs(nowMs: number, options: RollUpOptions): { minutes: number; hours: number } {
  const now = Math.floor(nowMs / 1000);
  const minuteCutoff = now - options.keepMinutesH * 3600;
  const hourCutoff = now - options.keepHoursD * 86_400;
  return { minutes: minuteCutoff - (minuteCutoff % 3600), hours: hourCutoff - (hourCutoff % 86_400) };
}
