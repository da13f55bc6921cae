/**
 * The process's cap on client connections (server.max_connections), over shared memory so every worker
 * thread holds its connections under one count.
 *
 * What is counted: the connections the gateway holds open (WebSockets, event streams), from their admission
 * to their close. Plain HTTP requests are short and uWS reports no HTTP connection opening or closing, so they
 * are not counted; each asks `refusal()` as it arrives (two reads of shared memory) and is refused while the
 * cap is full. The other refusal, 'file_descriptors', is set by the main thread's watch of the process's open
 * files (server/fd-watch.ts) while they are within the reserve of the open-files limit: past that limit uWS's
 * accept fails, and its loop retries it without pause.
 *
 * Refusing keeps the process below its open-files limit, so accept never fails: a refused connection costs
 * one descriptor for the moment its 503 is written, then is closed.
 */

/** Why a connection is refused: the cap is full, or the process's open files are near their limit. */
export type ConnectionRefusal = 'max_connections' | 'file_descriptors';

export interface ConnectionCap {
  /** The shared memory, handed to each worker thread. */
  readonly memory: SharedArrayBuffer;
  /** The cap in force (server.max_connections, resolved at start). */
  readonly max: number;
  /** Why a new connection would be refused now, or null. Cheap: what each HTTP request asks. */
  refusal(): ConnectionRefusal | null;
  /** Takes a place for a connection the gateway will hold (a WebSocket), in one step with the check across
   *  threads: null when taken, else why not. */
  tryHold(): ConnectionRefusal | null;
  /** Takes a place unchecked (an event stream: its request already asked refusal()). */
  hold(): void;
  /** Gives back a place taken by tryHold() or hold(). */
  release(): void;
  /** Connections held now, by every thread. */
  held(): number;
  /** The main thread's fd watch says whether the open files are within the reserve of their limit. */
  setShort(short: boolean): void;
}

const HELD = 0;
const SHORT = 1;
const MAX = 2;

/** A cap of `max`, on new memory (the main thread) or on `memory` a main thread made (a worker; max is read from it). */
export function createConnectionCap(max: number, memory?: SharedArrayBuffer): ConnectionCap {
  const cells = new Int32Array(memory ?? new SharedArrayBuffer(3 * 4));
  if (memory === undefined) Atomics.store(cells, MAX, max);
  const cap = Atomics.load(cells, MAX);
  return {
    memory: cells.buffer as SharedArrayBuffer,
    max: cap,
    refusal() {
      if (cells[HELD]! >= cap) return 'max_connections';
      return cells[SHORT] === 0 ? null : 'file_descriptors';
    },
    tryHold() {
      if (cells[SHORT] !== 0) return 'file_descriptors';
      if (Atomics.add(cells, HELD, 1) < cap) return null;
      Atomics.sub(cells, HELD, 1);
      return 'max_connections';
    },
    hold() {
      Atomics.add(cells, HELD, 1);
    },
    release() {
      Atomics.sub(cells, HELD, 1);
    },
    held: () => Atomics.load(cells, HELD),
    setShort(short) {
      Atomics.store(cells, SHORT, short ? 1 : 0);
    },
  };
}
