/**
 * How the main thread knows its worker threads are alive: each worker adds one to its own cell of a shared
 * Int32Array every BEAT_MS from a timer of its event loop (worker-thread.ts); a worker whose count has not
 * moved for server.worker_stall_s runs no event loop (stuck in a loop, paused), and is ended and replaced
 * (worker-pool.ts). A count rather than a time: the main thread reads it with its own clock only.
 */

/** How often a worker beats, in ms: small beside the shortest stall (1 s), cheap (one atomic add). */
export const BEAT_MS = 250;

/** How often the main thread looks at the beats, in ms. */
export const WATCH_MS = 250;

const MIB = 1024 * 1024;

/**
 * server.worker_max_heap_mb as each worker applies it: it checks its heap at each beat and, past `softBytes`,
 * closes its connections and ends (it is replaced). V8's hard limit (`hardOldGenMb`, the Worker's
 * resourceLimits) is set a quarter above plus 64 MiB, room for a beat's growth and the young generation: a
 * worker reaching it is ended by Node at once, which only a growth that fast within one beat can do.
 */
export function heapLimits(maxHeapMb: number): { softBytes: number; hardOldGenMb: number } {
  return { softBytes: maxHeapMb * MIB, hardOldGenMb: Math.ceil(maxHeapMb * 1.25) + 64 };
}

export interface StallWatch {
  /** The memory the workers beat in (one cell per worker, by number from 1). */
  readonly memory: SharedArrayBuffer;
  /** Starts watching worker `index` (once it is ready): its count as of now. */
  arm(index: number): void;
  /** Stops watching worker `index` (it ended, is being ended, or stops). */
  disarm(index: number): void;
  /** The workers armed whose count has not moved for the stall time, with how long; each is disarmed. */
  stalled(): Array<{ index: number; silentMs: number }>;
}

export function createStallWatch(count: number, stallMs: number, now: () => number = () => performance.now()): StallWatch {
  const memory = new SharedArrayBuffer(4 * count);
  const beats = new Int32Array(memory);
  /** Per armed worker: the count last read and when it last moved. */
  const seen = new Map<number, { count: number; at: number }>();
  return {
    memory,
    arm(index) {
      seen.set(index, { count: Atomics.load(beats, index - 1), at: now() });
    },
    disarm(index) {
      seen.delete(index);
    },
    stalled() {
      const t = now();
      const late: Array<{ index: number; silentMs: number }> = [];
      for (const [index, last] of seen) {
        const c = Atomics.load(beats, index - 1);
        if (c !== last.count) seen.set(index, { count: c, at: t });
        else if (t - last.at >= stallMs) late.push({ index, silentMs: Math.round(t - last.at) });
      }
      for (const { index } of late) seen.delete(index);
      return late;
    },
  };
}

/** A worker's side: what beats once for worker `index`. */
export function beater(memory: SharedArrayBuffer, index: number): () => void {
  const beats = new Int32Array(memory);
  return () => Atomics.add(beats, index - 1, 1);
}
