import type { BalanceBook } from './balance-book.js';
import type { Ledger, Reservation, UsageKey } from './ledger.js';
import type { PendingUsage } from './usage-rows.js';

/** The part of a ledger that meters calls: the same arithmetic over every kind of book. */
export type Meter = Pick<Ledger, 'available' | 'reserve' | 'settle' | 'settleBatch' | 'refund' | 'chargeDeliveries' | 'recordUsage'>;

interface OpenReservation extends Reservation {
  open: boolean;
}

/** Whether a reservation is still open: neither settled nor refunded. */
export function isOpen(reservation: Reservation): boolean {
  return (reservation as OpenReservation).open;
}

function checkRu(ru: number, what: string): void {
  if (!Number.isSafeInteger(ru) || ru < 0) throw new RangeError(`${what} must be a non-negative integer, got ${ru}`);
}

/**
 * Reserves and debits on `book` and counts every request in `usage` (placed in its minute by `now`).
 * `onCount` is called after each count, e.g. to schedule the shipment of the rows to the writer.
 */
export function createMeter(book: BalanceBook, usage: PendingUsage, now: () => number, onCount?: () => void): Meter {
  function count(ownerId: number, u: UsageKey, requests: number, ru: number): void {
    const at = now();
    usage.count(ownerId, u.endpointId, u.method, u.status, at, requests, ru, u.latencyMs);
    const f = u.failure;
    if (f !== undefined) usage.fail({ endpointId: u.endpointId, ownerId, at, method: u.method, ...f });
    onCount?.();
  }

  function close(reservation: Reservation): OpenReservation {
    const r = reservation as OpenReservation;
    if (!r.open) throw new Error('this reservation was already settled or refunded');
    r.open = false;
    return r;
  }

  return {
    available: (ownerId) => book.available(ownerId),
    reserve(ownerId, ru) {
      checkRu(ru, 'reserved RU');
      if (!book.reserve(ownerId, ru)) return null;
      const r: OpenReservation = { ownerId, ru, open: true };
      return r;
    },
    settle(reservation, actualRu, u) {
      checkRu(actualRu, 'settled RU');
      const r = close(reservation);
      book.close(r.ownerId, r.ru, actualRu);
      count(r.ownerId, u, 1, actualRu);
    },
    settleBatch(reservation, charges) {
      let total = 0;
      for (const c of charges) {
        checkRu(c.ru, `RU of ${c.method}`);
        total += c.ru;
      }
      const r = close(reservation);
      book.close(r.ownerId, r.ru, total);
      for (const c of charges) count(r.ownerId, c, 1, c.ru);
    },
    refund(reservation) {
      const r = close(reservation);
      book.close(r.ownerId, r.ru, 0);
    },
    chargeDeliveries(ownerId, ru, u, deliveries) {
      checkRu(ru, 'delivered RU');
      if (!book.charge(ownerId, ru)) return false;
      count(ownerId, u, deliveries, ru);
      return true;
    },
    recordUsage(ownerId, u, requests = 1) {
      count(ownerId, u, requests, 0);
    },
  };
}
