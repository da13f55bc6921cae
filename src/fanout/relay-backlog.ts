/**
 * Backpressure for the relays from the main thread to a worker (feed-relay.ts, event-relay.ts). A MessagePort
 * has none: postMessage queues whatever the receiving thread has not taken yet, without bound, in this process's
 * memory. So each relay counts the bytes of the notifications and frames it posts to its worker, the worker
 * acknowledges the bytes it has handled (once per turn of its event loop), and a worker whose unacknowledged
 * bytes pass the bound is too slow to be served: the relay lets go of everything it holds for it (its clients
 * are closed with a reason saying so) and refuses it new holds until it has drained half of its backlog.
 */

/** What the main side of a relay has posted to its worker and the worker has not acknowledged. */
export interface RelayBacklog {
  /** Counts `bytes` just posted: false when that took the backlog over the bound (the relay drops the worker). */
  posted(bytes: number): boolean;
  /** The worker handled `bytes` more. */
  acked(bytes: number): void;
  /** True from the moment the bound was passed until the backlog is down to half of it: no new holds then. */
  overloaded(): boolean;
  /** Bytes posted and not acknowledged. */
  bytes(): number;
}

/** The default bound of one worker's backlog per relay, in bytes (config server.worker_relay_max_bytes). */
export const DEFAULT_RELAY_BACKLOG_BYTES = 64 * 1024 * 1024;

export function createRelayBacklog(maxBytes: number): RelayBacklog {
  let bytes = 0;
  let overloaded = false;
  return {
    posted(n) {
      bytes += n;
      if (bytes <= maxBytes) return true;
      overloaded = true;
      return false;
    },
    acked(n) {
      bytes = Math.max(0, bytes - n);
      if (overloaded && bytes <= maxBytes / 2) overloaded = false;
    },
    overloaded: () => overloaded,
    bytes: () => bytes,
  };
}

/** Why a worker's holds were dropped, as its clients are told (fits a WebSocket close reason). */
export function backlogReason(maxBytes: number): string {
  return `worker thread too slow: over ${Math.round(maxBytes / 1024)} KB of notifications unread`;
}

/** The worker's side: sums the bytes it handled and acknowledges them once per turn of its event loop. */
export function createBacklogAcks(send: (bytes: number) => void): { took(bytes: number): void } {
  let bytes = 0;
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    const n = bytes;
    bytes = 0;
    send(n);
  };
  return {
    took(n) {
      bytes += n;
      if (scheduled) return;
      scheduled = true;
      setImmediate(flush).unref();
    },
  };
}
