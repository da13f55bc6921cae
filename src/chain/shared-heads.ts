/**
 * Each chain's served head (served-head.ts) in memory every thread of the process reads, so a client whose calls
 * land on different worker threads (a new connection each) never sees the head go back from one thread to the
 * next: each thread works its served head out from the same relayed reports but at its own moment, and the
 * thread that learns a head first raises the shared one for all.
 *
 * One SharedArrayBuffer for the process (made by the main thread, handed to each worker like the write mark),
 * holding SLOTS cells of [key, head] as 64-bit integers. A chain finds its cell by its slug's key (the first 8
 * bytes of the slug's SHA-256, never 0): claimed with a compare-and-swap on first use, in the same place in every
 * thread whatever order chains are made in, and still the slug's after a reload. Past SLOTS chains a chain gets
 * no cell and its threads serve their own heads.
 */
import { createHash } from 'node:crypto';

/** Chains the memory holds: more than any gateway configures. */
const SLOTS = 256;
/** A head not known yet. */
const NONE = -1n;

/** One chain's shared served head. */
export interface HeadCell {
  /** The head, or null while none is known. */
  load(): number | null;
  /** Raises the head to `head` unless it is already as high (any thread at any moment). */
  raise(head: number): void;
  /** Sets the head, also lower (every node went back) or unknown (null: a chain made anew). */
  store(head: number | null): void;
}

export interface SharedHeads {
  /** The shared memory, handed to each worker thread. */
  readonly memory: SharedArrayBuffer;
  /** Chain `slug`'s cell; null when every cell is taken by other chains. */
  cell(slug: string): HeadCell | null;
}

export function createSharedHeads(memory: SharedArrayBuffer = initial()): SharedHeads {
  const cells = new BigInt64Array(memory);
  return {
    memory,
    cell(slug) {
      const key = keyOf(slug);
      const start = Number(key % BigInt(SLOTS));
      for (let probe = 0; probe < SLOTS; probe++) {
        const at = ((start + probe) % SLOTS) * 2;
        const held = Atomics.compareExchange(cells, at, 0n, key);
        if (held === 0n || held === key) return cellAt(cells, at + 1);
      }
      return null;
    },
  };
}

/** Every cell free, every head unknown: made once, by the main thread, before any worker reads it. */
function initial(): SharedArrayBuffer {
  const memory = new SharedArrayBuffer(SLOTS * 16);
  const cells = new BigInt64Array(memory);
  for (let at = 1; at < cells.length; at += 2) cells[at] = NONE;
  return memory;
}

function keyOf(slug: string): bigint {
  const key = createHash('sha256').update(slug).digest().readBigInt64BE(0);
  return key === 0n ? 1n : key < 0n ? -key : key;
}

function cellAt(cells: BigInt64Array, at: number): HeadCell {
  return {
    load() {
      const head = Atomics.load(cells, at);
      return head < 0n ? null : Number(head);
    },
    raise(head) {
      const next = BigInt(head);
      for (let seen = Atomics.load(cells, at); seen < next; ) {
        const was = Atomics.compareExchange(cells, at, seen, next);
        if (was === seen) return;
        seen = was;
      }
    },
    store(head) {
      Atomics.store(cells, at, head === null ? NONE : BigInt(head));
    },
  };
}
