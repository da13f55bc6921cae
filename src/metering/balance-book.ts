import type { Store } from '../store/open.js';

/**
 * Where the ledger keeps each owner's live balance: `available` = stored balance − debits not yet
 * written − open reservations. An owner's stored balance is read at its first use (a read that fails
 * throws the SqliteError: answer 503). Two kinds: a Map in one thread (`createLocalBook`, the daemon
 * with one worker) and slots in shared memory that every worker thread reserves from (shared-book.ts).
 */
export interface BalanceBook {
  /** Stored balance − unflushed debits − open reservations; 0 for an unknown owner. */
  available(ownerId: number): number;
  /** Sets `ru` aside when `available(ownerId) >= ru`; false (nothing set aside) otherwise. */
  reserve(ownerId: number, ru: number): boolean;
  /** Closes a reservation of `reserved` RU that cost `debited` (more than `reserved` may take the balance below zero). */
  close(ownerId: number, reserved: number, debited: number): void;
  /** Debits `ru` at once when `available(ownerId) >= ru`; false (nothing debited) otherwise. */
  charge(ownerId: number, ru: number): boolean;
  /**
   * The writer stored `debited` RU of the owner's debits and the store now holds `balance` (RETURNING,
   * so top-ups committed meanwhile are in it; undefined: no such owner row). Only the writer calls it.
   */
  written(ownerId: number, debited: number, balance: number | undefined): void;
  /** Has stored balances (one owner's, or all) read again, e.g. after a CLI top-up. */
  reload(ownerId?: number): void;
}

interface Balance {
  /** ru_balance as last read from or returned by SQLite; includes every flushed debit. */
  stored: number;
  /** The reload generation `stored` was read in; stale when it differs from the book's. */
  generation: number;
  unflushed: number;
  reserved: number;
}

/**
 * One thread's book: a Map, read from `store` lazily (a reload only marks balances stale, the next use
 * reads again). JS runs one callback at a time, so the arithmetic needs no lock.
 */
export function createLocalBook(store: Store): BalanceBook {
  const sql = store.sql.ledger;
  const balances = new Map<number, Balance>();
  let generation = 0;

  function balanceOf(ownerId: number): Balance {
    let b = balances.get(ownerId);
    if (b === undefined) {
      b = { stored: sql.balance.get(ownerId) ?? 0, generation, unflushed: 0, reserved: 0 };
      balances.set(ownerId, b);
    } else if (b.generation !== generation) {
      b.stored = sql.balance.get(ownerId) ?? 0;
      b.generation = generation;
    }
    return b;
  }

  return {
    available(ownerId) {
      const b = balanceOf(ownerId);
      return b.stored - b.unflushed - b.reserved;
    },
    reserve(ownerId, ru) {
      const b = balanceOf(ownerId);
      if (b.stored - b.unflushed - b.reserved < ru) return false;
      b.reserved += ru;
      return true;
    },
    close(ownerId, reserved, debited) {
      // A reservation's owner is in the Map: reserve put it there, and nothing removes it.
      const b = balances.get(ownerId)!;
      b.reserved -= reserved;
      b.unflushed += debited;
    },
    charge(ownerId, ru) {
      const b = balanceOf(ownerId);
      if (b.stored - b.unflushed - b.reserved < ru) return false;
      b.unflushed += ru;
      return true;
    },
    written(ownerId, debited, balance) {
      const b = balances.get(ownerId);
      if (b === undefined) return;
      b.unflushed -= debited;
      if (balance !== undefined) {
        b.stored = balance;
        b.generation = generation;
      }
    },
    reload(ownerId) {
      if (ownerId === undefined) generation++;
      else {
        const b = balances.get(ownerId);
        if (b !== undefined) b.generation = -1;
      }
    },
  };
}
