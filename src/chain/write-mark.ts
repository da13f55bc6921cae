/**
 * When a transaction last went through the gateway (ChainRuntime.noteWrite), shared by every thread of the
 * process: a client that sends a transaction through one worker and asks eth_blockNumber through another must
 * not be answered from a head polled before the block its transaction lands in. One mark serves every chain:
 * a write on one makes the others ask a node for eth_blockNumber for half a second, which costs a call and
 * never serves a head too old.
 */
import { performance } from 'node:perf_hooks';

export interface WriteMark {
  /** The shared memory, handed to each worker thread. */
  readonly memory: SharedArrayBuffer;
  /** A write went through now. */
  note(): void;
  /** When the last write went through, in this thread's performance.now() time; -Infinity before any. */
  at(): number;
}

/** Unset: no write yet. */
const NONE = -1n;

export function createWriteMark(memory: SharedArrayBuffer = initial()): WriteMark {
  const cell = new BigInt64Array(memory, 0, 1);
  return {
    memory,
    note() {
      // Microseconds since the epoch: each thread's performance.now() counts from its own start.
      Atomics.store(cell, 0, BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)));
    },
    at() {
      const us = Atomics.load(cell, 0);
      return us === NONE ? Number.NEGATIVE_INFINITY : Number(us) / 1000 - performance.timeOrigin;
    },
  };
}

function initial(): SharedArrayBuffer {
  const memory = new SharedArrayBuffer(8);
  new BigInt64Array(memory)[0] = NONE;
  return memory;
}
