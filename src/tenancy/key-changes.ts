import type { Store } from '../store/open.js';
import type { KeyCache } from './key-cache.js';

/**
 * One directory's reader of the store's key-change log (store/migrations.ts, `key_changes`): it applies
 * the rows written since the last one it read to the directory's key cache, forgetting only the keys they
 * name (both of an endpoint whose rotated-out key is in its grace), and queues the endpoints that stopped
 * working (deleted, or their owner suspended) or changed (their key rotated, their restrictions changed)
 * for their sockets to be closed: a changed endpoint's clients reconnect under its new grant. Everything up to the last seq read has been applied. A write of the directory's
 * own connection reads the log at once (its own row, and any other connection's before it), so each row
 * is applied exactly once.
 */
export interface KeyChangeReader {
  /** Applies the rows written since the last read; throws the SqliteError when the store fails. */
  apply(): void;
  /**
   * `apply` after a write of this connection, which committed; `madeHere`, the endpoint it made, whose
   * key was forgotten already (its row need not forget the remembered misses). False when the read
   * failed: the rows are then read at the next `apply`, and the caller applies its own change meanwhile.
   */
  afterOwnWrite(madeHere?: string): boolean;
  /** Queues an endpoint whose sockets must be closed (the caller's own deletion, when its read failed). */
  revoke(endpointId: string): void;
  /** The endpoints queued since the last call, each once. */
  takeRevoked(): string[];
}

export function createKeyChangeReader(store: Store, cache: KeyCache): KeyChangeReader {
  const sql = store.sql.directory;
  let lastSeq = sql.keyChangesSpan.get()![1];
  let madeHere: string | undefined;
  let suspended = new Set(sql.suspendedOwnerIds.all());
  let revoked: string[] = [];
  // Owners whose keys were forgotten but whose suspension is still to be compared: kept across reads, so
  // a store fault between the two never loses the closing of a suspended owner's sockets.
  const ownersToCompare = new Set<number>();

  /** An owner changed (its keys already forgotten): revoke its endpoints when it was suspended just now. */
  function compareSuspension(ownerId: number): void {
    if (sql.ownerSuspended.get(ownerId) === 1) {
      if (!suspended.has(ownerId)) revoked.push(...sql.liveEndpointIds.all(ownerId));
      suspended.add(ownerId);
    } else suspended.delete(ownerId);
  }

  /**
   * The log lost rows this reader had not read (pruned after a day without a look): what changed is
   * unknown, so every key is read again, as a fresh directory would. Suspensions are still compared.
   */
  function startOver(last: number): void {
    cache.clear();
    const nowSuspended = new Set(sql.suspendedOwnerIds.all());
    for (const ownerId of nowSuspended) if (!suspended.has(ownerId)) revoked.push(...sql.liveEndpointIds.all(ownerId));
    suspended = nowSuspended;
    ownersToCompare.clear();
    lastSeq = last;
  }

  function apply(): void {
    const rows = sql.keyChangesAfter.all(lastSeq);
    if (rows.length > 0 && rows[0]![0] !== lastSeq + 1) {
      const [first, last] = sql.keyChangesSpan.get()!;
      if (first > lastSeq + 1) return startOver(last);
    }
    // Every key a row names is forgotten before any further read of the store, so a read that fails
    // cannot leave a key granting what its row took away. An owner's suspension is compared once per
    // read, from its state now, after its endpoints' rows.
    for (const [seq, kind, ownerId, endpointId] of rows) {
      lastSeq = seq;
      if (kind === 'owner_changed') {
        cache.forgetOwner(ownerId);
        // Unsuspended: its keys may be remembered as misses.
        cache.forgetMisses();
        ownersToCompare.add(ownerId);
      } else if (kind === 'endpoint_created') {
        // A key made elsewhere may be remembered as a miss.
        if (endpointId !== madeHere) cache.forgetMisses();
      } else if (endpointId !== null) {
        cache.forgetEndpoint(endpointId);
        if (kind === 'endpoint_changed') cache.forgetMisses();
        revoked.push(endpointId);
      }
    }
    for (const ownerId of ownersToCompare) {
      compareSuspension(ownerId);
      ownersToCompare.delete(ownerId);
    }
  }

  return {
    apply,
    afterOwnWrite(made) {
      madeHere = made;
      try {
        apply();
        return true;
      } catch {
        return false;
      } finally {
        madeHere = undefined;
      }
    },
    revoke(endpointId) {
      revoked.push(endpointId);
    },
    takeRevoked() {
      const ids = revoked;
      revoked = [];
      return ids;
    },
  };
}
