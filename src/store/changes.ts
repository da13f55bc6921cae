/**
 * A count of the store's changes that matter to every thread at once (an endpoint created or deleted, an
 * owner suspended), in shared memory: the thread that writes bumps it, and every thread's directory looks at
 * it before trusting a cached key. SQLite's data_version tells a connection the same, but only when asked,
 * and asking on every call costs a statement; a shared integer costs a load.
 */
export interface StoreChanges {
  /** The shared memory, handed to each worker thread. */
  readonly memory: SharedArrayBuffer;
  /** This thread changed the store. */
  bump(): void;
  /** True once after another thread changed the store since the last call. */
  changed(): boolean;
}

export function createStoreChanges(memory: SharedArrayBuffer = new SharedArrayBuffer(4)): StoreChanges {
  const count = new Int32Array(memory, 0, 1);
  let seen = Atomics.load(count, 0);
  return {
    memory,
    bump() {
      seen = Atomics.add(count, 0, 1) + 1;
    },
    changed() {
      const now = Atomics.load(count, 0);
      if (now === seen) return false;
      seen = now;
      return true;
    },
  };
}
