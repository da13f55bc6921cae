/**
 * The process's file descriptors: its open-files limit, how many it holds, and the default cap on client
 * connections derived from them.
 *
 * uWS accepts in native code: at the open-files limit its accept fails with EMFILE, the connection stays in
 * the listen backlog, the listen socket stays readable and the loop retries at once, a core at 100 % and
 * nothing said. The gateway therefore keeps below the limit (limits/connection-cap.ts): its cap on client
 * connections defaults to the limit less a reserve for everything else the process holds, and this watch
 * looks at the descriptors held every WATCH_MS (less often where counting them costs more). Within
 * SHORT_MARGIN of the limit it has the cap refuse new connections (reason file_descriptors) until they fall
 * back; at the limit itself (accept failing) it logs an error naming EMFILE, once per condition.
 */
import { performance } from 'node:perf_hooks';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import type { Config } from '../config/schema.js';
import type { ConnectionCap } from '../limits/connection-cap.js';

/** How often the descriptors held are counted, in ms, at the most: see openFiles for the cost. */
export const WATCH_MS = 500;
/** A count may take this share of the main thread at most: a slow count (listing thousands of descriptors
 *  on a kernel before 6.2) spaces the next one out. */
const WATCH_SHARE = 0.01;
/** Descriptors kept free at the least: the cap refuses new connections when fewer are left. */
export const SHORT_MARGIN = 32;
/** Kept for what is not counted elsewhere: health checks, scrapes, status, management, logs, DNS. */
export const HEADROOM = 64;
/** What one worker thread holds of its own (its event loops, their wake-ups and timers). */
export const FDS_PER_WORKER = 12;
/** The cap never defaults below this: a limit too low to serve is said in the log instead. */
export const MIN_CONNECTIONS = 16;

/** The soft open-files limit, from /proc/self/limits; null where it cannot be read (not Linux) or is unlimited. */
export function openFilesLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number | null {
  let text: string;
  try {
    text = read();
  } catch {
    return null;
  }
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
  return m === null || m[1] === 'unlimited' ? null : Number(m[1]);
}

/**
 * Descriptors the process holds now; Infinity when none is left to count them with (EMFILE); null where
 * /proc/self/fd cannot be read. Linux 6.2 and later give the count as the directory's size (a stat, a few
 * µs); before, it is listed (about 3 ms per 1000 descriptors, measured).
 */
export function openFiles(): number | null {
  try {
    const size = statSync('/proc/self/fd').size;
    if (size > 0) return size;
    // The directory read holds one descriptor of its own while it lists.
    return readdirSync('/proc/self/fd').length - 1;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'EMFILE' || code === 'ENFILE' ? Number.POSITIVE_INFINITY : null;
  }
}

/** The cap in force and how it was found, as the start logs it. */
export interface ResolvedCap {
  max: number;
  /** 'config' when server.max_connections names it, 'auto' when derived from the limit. */
  source: 'config' | 'auto';
  limit: number | null;
  /** Descriptors kept for the rest of the process (auto only). */
  reserve: number | null;
}

/**
 * server.max_connections, or by default the open-files limit less a reserve: what the process holds now
 * (listeners, the store, logs), each upstream's sockets (its max_connections, a WebSocket and a probe), each
 * worker thread's own, and HEADROOM. Without a readable limit, 'auto' is no cap at all.
 */
export function resolveMaxConnections(config: Config, limit: number | null, openNow: number, workers: number): ResolvedCap {
  const configured = config.server.max_connections;
  if (configured !== 'auto') return { max: configured, source: 'config', limit, reserve: null };
  if (limit === null) return { max: 2 ** 31 - 1, source: 'auto', limit, reserve: null };
  let upstreamSockets = 0;
  for (const chain of Object.values(config.chains)) for (const u of chain.upstreams) upstreamSockets += u.max_connections + 2;
  const reserve = openNow + upstreamSockets + (workers > 1 ? workers * FDS_PER_WORKER : 0) + HEADROOM;
  return { max: Math.max(MIN_CONNECTIONS, limit - reserve), source: 'auto', limit, reserve };
}

export interface FdWatchOptions {
  limit: number;
  cap: ConnectionCap;
  /** Told when the descriptors come within SHORT_MARGIN of the limit and when they leave it. */
  onShort(short: boolean, open: number): void;
  /** Told when the descriptors reach the limit (accept fails with EMFILE) and when they leave it. */
  onExhausted(exhausted: boolean, open: number): void;
  /** Counts the descriptors held (default openFiles); injectable for tests. */
  count?: () => number | null;
  intervalMs?: number;
}

/** Starts the watch; returns its stop. */
export function startFdWatch(opts: FdWatchOptions): () => void {
  const count = opts.count ?? openFiles;
  const margin = Math.max(SHORT_MARGIN, Math.ceil(opts.limit * 0.02));
  let short = false;
  let exhausted = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let stopped = false;
  const look = (): void => {
    const started = performance.now();
    const open = count();
    const tookMs = performance.now() - started;
    if (!stopped) {
      timer = setTimeout(look, Math.max(opts.intervalMs ?? WATCH_MS, tookMs / WATCH_SHARE));
      timer.unref();
    }
    if (open === null) return;
    // At the limit less one: the next accept, or the read of this very count, finds none.
    const nowExhausted = open >= opts.limit - 1;
    const nowShort = open >= opts.limit - margin;
    if (nowShort !== short) {
      short = nowShort;
      opts.cap.setShort(short);
      opts.onShort(short, open);
    }
    if (nowExhausted !== exhausted) {
      exhausted = nowExhausted;
      opts.onExhausted(exhausted, open);
    }
  };
  look();
  return () => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
  };
}
