import { LATENCY_BUCKET_COUNT } from '../store/latency-columns.js';
import type { FailureDbRow, UsageParams } from '../store/statements.js';
import { type LatencyCounts, latencyBucket } from './latency-histogram.js';

/** One row of `usage_minute` waiting to be written: requests and RU added up under its key. */
export interface PendingRow {
  endpointId: string;
  ownerId: number;
  method: string;
  /** The minute's start, unix seconds. */
  t: number;
  status: number;
  requests: number;
  ru: number;
  /**
   * The latency histogram of its successful timed calls (latency-histogram.ts), the only latency the stats read
   * (stats.ts); null while none was timed: deliveries never are, and refusals and failures are not kept.
   */
  latency?: LatencyCounts | null | undefined;
}

/**
 * One failed or refused call kept for the owner's recent failures (a ring per endpoint in the store): what
 * was asked and what went wrong, never the call's params nor its key.
 */
export interface PendingFailure extends FailureDbRow {
  endpointId: string;
  ownerId: number;
}

/** Failures held between writes at most; past it the oldest are dropped (a flood keeps its newest). */
export const MAX_PENDING_FAILURES = 1000;

/**
 * Rows as one worker ships them to the writer: each row's fields one after the other (endpointId, ownerId,
 * method, t, status, requests, ru), then how many latency counts follow (0 untimed, else LATENCY_BUCKET_COUNT)
 * and those counts, in a flat array. postMessage copies a flat array of strings and numbers for about a third
 * of what objects cost it, which repeat their property names in every copy (a nested array is one more
 * object): with calls spread over many keys a shipment holds about a row per call.
 */
export type ShippedRows = Array<string | number>;

/** A row's fields in a shipment before its latency counts: its seven, and the number of counts. */
const SHIPPED_FIELDS = 8;

/**
 * A row as PendingUsage keeps it: its latency histogram is LATENCY_BUCKET_COUNT counts from `latencyAt` in
 * the pending usage's one flat array of counts (-1: none yet), so that a row's first timed call allocates
 * no array of its own, and a shipment copies counts, not arrays.
 */
interface KeptRow extends Omit<PendingRow, 'latency'> {
  latencyAt: number;
}

/**
 * Usage counted since the last write (or shipment), one row per endpoint, method, minute and status.
 * Its RU are exactly the debits not yet written: every debit is counted in a row, so the writer takes
 * the debits from the rows, and `sum(credits) - sum(usage ru) = ru_balance` holds at every commit.
 */
export interface PendingUsage {
  /**
   * Adds `requests` and `ru` to the row of `ownerId`'s `endpointId`, `method` and `status` in the minute of
   * `atMs`, and `latencyMs` to its histogram when the call succeeded (status 0) and was timed (-1: an untimed
   * delivery).
   */
  count(
    ownerId: number,
    endpointId: string,
    method: string,
    status: number,
    atMs: number,
    requests: number,
    ru: number,
    latencyMs?: number,
  ): void;
  /** Keeps a failed call for the owner's recent failures, written with the rows. */
  fail(failure: PendingFailure): void;
  /** The failures waiting, oldest first (kept until `clear` or a take). */
  failures(): readonly PendingFailure[];
  /** Hands the failures over and forgets them (a shipment's other half). */
  takeFailures(): PendingFailure[];
  /** Adds failures shipped from another thread. */
  absorbFailures(failures: readonly PendingFailure[]): void;
  /** The rows, for a write that may fail (they stay until `clear`). */
  rows(): IterableIterator<PendingRow>;
  /** Hands every row over and starts empty (a shipment): the caller now owns them. */
  take(): PendingRow[];
  /** Hands every row over as `take` does, flat, for postMessage (see ShippedRows). */
  takeShipment(): ShippedRows;
  /** Adds the rows of a shipment (`takeShipment`, in another thread) to the same keys. */
  absorbShipment(rows: ShippedRows): void;
  /** Forgets every row (after the write that stored them committed). */
  clear(): void;
  /** Rows waiting. */
  readonly size: number;
  /** Their RU: the debits waiting. */
  readonly ru: number;
}

/** Writes `rows` into `flat` from `at`, each with its histogram out of `counts` (see ShippedRows); where the next row goes. */
function shipRows(flat: ShippedRows, at: number, rows: Map<string, KeptRow>, counts: readonly number[]): number {
  let i = at;
  for (const r of rows.values()) {
    flat[i++] = r.endpointId;
    flat[i++] = r.ownerId;
    flat[i++] = r.method;
    flat[i++] = r.t;
    flat[i++] = r.status;
    flat[i++] = r.requests;
    flat[i++] = r.ru;
    if (r.latencyAt < 0) flat[i++] = 0;
    else {
      flat[i++] = LATENCY_BUCKET_COUNT;
      for (let k = r.latencyAt; k < r.latencyAt + LATENCY_BUCKET_COUNT; k++) flat[i++] = counts[k]!;
    }
  }
  return i;
}

type FailureQueue = Pick<PendingUsage, 'fail' | 'failures' | 'takeFailures' | 'absorbFailures'>;

/** The failed calls waiting, oldest first: past MAX_PENDING_FAILURES the older half goes (only the newest are shown). */
function createFailureQueue(): FailureQueue {
  let failed: PendingFailure[] = [];
  const keep = (f: PendingFailure): void => {
    if (failed.length >= MAX_PENDING_FAILURES) failed = failed.slice(failed.length - MAX_PENDING_FAILURES / 2);
    failed.push(f);
  };
  return {
    fail: keep,
    failures: () => failed,
    takeFailures() {
      const taken = failed;
      failed = [];
      return taken;
    },
    absorbFailures(list) {
      for (const f of list) keep(f);
    },
  };
}

export function createPendingUsage(): PendingUsage {
  // Each endpoint's first row by its id alone: the id is a string the caller already holds (the key cache's),
  // whose hash V8 keeps, where a key joining the four fields is a string made and hashed per call; with
  // calls spread over many keys that was most of a count's cost. The endpoint's other rows (another method,
  // minute or status) by that joined key.
  let byEndpoint = new Map<string, KeptRow>();
  let others = new Map<string, KeptRow>();
  // The rows' latency histograms, one after the other (KeptRow.latencyAt).
  let counts: number[] = [];
  let ru = 0;
  // The row the last count went to: a key's calls come in runs of one method, minute and status.
  // Forgotten whenever the rows are handed over.
  let last: KeptRow | null = null;
  const failures = createFailureQueue();

  const matches = (row: KeptRow, method: string, status: number, t: number): boolean =>
    row.t === t && row.status === status && row.method === method;

  function add(
    ownerId: number,
    endpointId: string,
    method: string,
    status: number,
    t: number,
    requests: number,
    rowRu: number,
    latencyMs: number,
  ): KeptRow {
    let row = last;
    if (row === null || row.endpointId !== endpointId || !matches(row, method, status, t)) {
      row = byEndpoint.get(endpointId) ?? null;
      if (row === null) {
        row = { endpointId, ownerId, method, t, status, requests: 0, ru: 0, latencyAt: -1 };
        byEndpoint.set(endpointId, row);
      } else if (!matches(row, method, status, t)) {
        const key = `${endpointId}\u0000${method}\u0000${t}\u0000${status}`;
        row = others.get(key) ?? null;
        if (row === null) {
          row = { endpointId, ownerId, method, t, status, requests: 0, ru: 0, latencyAt: -1 };
          others.set(key, row);
        }
      }
      last = row;
    }
    row.requests += requests;
    row.ru += rowRu;
    ru += rowRu;
    // Only successes' latency is read (stats.ts): a refusal's would be 24 counts made, shipped and written for nothing.
    if (latencyMs >= 0 && status === 0) counts[histogramOf(row) + latencyBucket(latencyMs)]! += requests;
    return row;
  }

  /** Where `row`'s counts start in `counts`, made (zeros) on its first timed call. */
  function histogramOf(row: KeptRow): number {
    if (row.latencyAt < 0) {
      row.latencyAt = counts.length;
      for (let i = 0; i < LATENCY_BUCKET_COUNT; i++) counts.push(0);
    }
    return row.latencyAt;
  }

  /** A kept row as the writers take it, its histogram copied out of `counts`. */
  function handed(r: KeptRow): PendingRow {
    const { latencyAt, ...fields } = r;
    return { ...fields, latency: latencyAt < 0 ? null : counts.slice(latencyAt, latencyAt + LATENCY_BUCKET_COUNT) };
  }

  function* all(): IterableIterator<PendingRow> {
    for (const r of byEndpoint.values()) yield handed(r);
    for (const r of others.values()) yield handed(r);
  }

  /** Forgets the rows: handed over or written. The failures are taken on their own (takeFailures) or by `clear`. */
  function reset(): void {
    byEndpoint = new Map();
    others = new Map();
    counts = [];
    last = null;
    ru = 0;
  }

  return {
    count(ownerId, endpointId, method, status, atMs, requests, rowRu, latencyMs = -1) {
      add(ownerId, endpointId, method, status, Math.floor(atMs / 60_000) * 60, requests, rowRu, latencyMs);
    },
    ...failures,
    rows: all,
    take() {
      const rows = [...all()];
      reset();
      return rows;
    },
    takeShipment() {
      const flat: ShippedRows = new Array((byEndpoint.size + others.size) * SHIPPED_FIELDS + counts.length);
      shipRows(flat, shipRows(flat, 0, byEndpoint, counts), others, counts);
      reset();
      return flat;
    },
    absorbShipment(flat) {
      for (let i = 0; i + SHIPPED_FIELDS <= flat.length; ) {
        const row = add(
          flat[i + 1] as number,
          flat[i] as string,
          flat[i + 2] as string,
          flat[i + 4] as number,
          flat[i + 3] as number,
          flat[i + 5] as number,
          flat[i + 6] as number,
          -1,
        );
        const timed = flat[i + 7] as number;
        i += SHIPPED_FIELDS;
        if (timed > 0) {
          const at = histogramOf(row);
          for (let k = 0; k < timed; k++) counts[at + k]! += flat[i + k] as number;
          i += timed;
        }
      }
    },
    clear() {
      reset();
      failures.takeFailures();
    },
    get size() {
      return byEndpoint.size + others.size;
    },
    get ru() {
      return ru;
    },
  };
}

const NO_LATENCY: readonly number[] = new Array<number>(LATENCY_BUCKET_COUNT).fill(0);

/** A row's parameters for `addUsage` (store/statements.ts): its fields, then its latency counts (zeros when untimed). */
export function usageRowParams(r: PendingRow): UsageParams {
  return [r.endpointId, r.ownerId, r.method, r.t, r.status, r.requests, r.ru, ...(r.latency ?? NO_LATENCY)];
}
