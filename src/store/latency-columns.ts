/**
 * The latency histogram's columns in the usage tables (both stores): one count per bucket, `lat_0` the
 * fastest. Plain integer columns rather than one array, so that an upsert and a roll-up add them with the
 * same `sum` and `+` as requests and RU, in SQLite and PostgreSQL alike. metering/latency-histogram.ts says
 * what each bucket holds.
 */
export const LATENCY_BUCKET_COUNT = 24;

/** A latency column's name. */
export type LatencyColumn = `lat_${number}`;

/** `lat_0` … `lat_23`, in bucket order. */
export const LATENCY_COLUMNS: readonly LatencyColumn[] = Array.from({ length: LATENCY_BUCKET_COUNT }, (_, i): LatencyColumn => `lat_${i}`);

/** `lat_0, lat_1, …`: the column list of an INSERT or SELECT. */
export const LATENCY_COLUMN_LIST = LATENCY_COLUMNS.join(', ');

/** `sum(lat_0) AS lat_0, …`: a grouped SELECT's sums (a roll-up's or a stats read's). */
export const LATENCY_SUMS = LATENCY_COLUMNS.map((c) => `sum(${c}) AS ${c}`).join(', ');

/** `lat_0 = <table>.lat_0 + excluded.lat_0, …`: an upsert's additions (`table` qualifies the old row, as PostgreSQL needs). */
export function latencyAdditions(table: string): string {
  return LATENCY_COLUMNS.map((c) => `${c} = ${table}${c} + excluded.${c}`).join(', ');
}

/** The columns' definitions for CREATE/ALTER TABLE: `ALTER TABLE <table> ADD COLUMN lat_i <type> NOT NULL DEFAULT 0;` each. */
export function addLatencyColumns(table: string, type: string): string {
  return LATENCY_COLUMNS.map((c) => `ALTER TABLE ${table} ADD COLUMN ${c} ${type} NOT NULL DEFAULT 0;`).join('\n');
}
