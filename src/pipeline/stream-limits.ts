/**
 * The limits on what a caller holds open: WebSocket connections and Beacon event streams (per key, or per IP on
 * the public path), and subscriptions per WebSocket connection. The server asks before it opens and writes the
 * refusal it is given.
 */
import type { Caller } from './admission.js';

/** Open connections or streams per key or IP. */
export interface ConnectionCounts {
  open(key: string): void;
  /** Opens one for `key` when fewer than `max` are open, in one step (worker threads admit at the same time). */
  tryOpen(key: string, max: number): boolean;
  close(key: string): void;
  count(key: string): number;
}

export function createConnectionCounts(): ConnectionCounts {
  const counts = new Map<string, number>();
  return {
    open: (key) => void counts.set(key, (counts.get(key) ?? 0) + 1),
    tryOpen(key, max) {
      const n = counts.get(key) ?? 0;
      if (n >= max) return false;
      counts.set(key, n + 1);
      return true;
    },
    close(key) {
      const n = (counts.get(key) ?? 1) - 1;
      if (n > 0) counts.set(key, n);
      else counts.delete(key);
    },
    count: (key) => counts.get(key) ?? 0,
  };
}

/** The per-key and per-IP limits of one kind of connection (config websocket.* or sse.*). */
export interface ConnectionLimits {
  max_connections_per_key: number;
  max_connections_per_ip: number;
}

/**
 * Whether the caller may open one more connection of a kind: its count key (`ep:<endpoint id>`, or the public
 * caller's limiter key, `ip:<address>`) and, when at its limit, the refusal's message naming the limit.
 */
export function admitConnection(
  counts: ConnectionCounts,
  caller: Caller,
  limits: ConnectionLimits,
  section: 'websocket' | 'sse',
  what: string,
): { countKey: string; limit: number; refusal: string | null } {
  const countKey = caller.auth === null ? caller.limitKey : `ep:${caller.auth.endpointId}`;
  const limit = caller.auth === null ? limits.max_connections_per_ip : limits.max_connections_per_key;
  if (counts.count(countKey) < limit) return { countKey, limit, refusal: null };
  return { countKey, limit, refusal: connectionRefusal(caller, limit, section, what) };
}

/** The refusal of one connection more than `limit`, naming the limit's key. */
export function connectionRefusal(caller: Caller, limit: number, section: 'websocket' | 'sse', what: string): string {
  const which = caller.auth === null ? `${section}.max_connections_per_ip` : `${section}.max_connections_per_key`;
  return `Too many open ${what}: the limit is ${limit} (${which})`;
}
