/** Real SQLite files in a fresh temp directory per test, removed at teardown. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { openStore, type Store, type StoreOptions } from '../../src/store/open.js';

export interface Teardown {
  teardown(fn: () => void): void;
}

/** Every table of the schema, in name order: the same in SQLite and PostgreSQL (which adds `chaingate_schema`). */
export const STORE_TABLES = [
  'call_failures',
  'credits',
  'endpoints',
  'instances',
  'management_keys',
  'owners',
  'reservations',
  'usage_batches',
  'usage_day',
  'usage_hour',
  'usage_minute',
  'webhook_deliveries',
  'webhooks',
];

/** A path for a database file in a temp directory that is removed when the test ends. */
export function tempDbPath(t: Teardown, name = 'chaingate.db'): string {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-store-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, name);
}

/** Opens a store on a new temp file (or on `path`), closed at teardown. */
export function tempStore(t: Teardown, path?: string, options?: StoreOptions): Store {
  const store = openStore(path ?? tempDbPath(t), options);
  t.teardown(() => {
    if (store.db.open) store.close();
  });
  return store;
}

/** Inserts an owner with `ru` as its opening credit, the way the CLI does; returns its id. */
export function addOwner(db: Database.Database, ru: number, plan = 'free', name = 'acme'): number {
  const id = Number(
    db.prepare('INSERT INTO owners (name, plan, ru_balance, created_at) VALUES (?, ?, ?, 0)').run(name, plan, ru).lastInsertRowid,
  );
  if (ru > 0) db.prepare('INSERT INTO credits (owner_id, ru, at) VALUES (?, ?, 0)').run(id, ru);
  return id;
}

/** Credits `ru` to the owner the way the CLI does: the credit and the balance in one transaction. */
export function topUp(db: Database.Database, owner: number, ru: number): void {
  db.transaction(() => {
    db.prepare('INSERT INTO credits (owner_id, ru, at) VALUES (?, ?, 0)').run(owner, ru);
    db.prepare('UPDATE owners SET ru_balance = ru_balance + ? WHERE id = ?').run(ru, owner);
  }).immediate();
}

/**
 * The ledger invariant, per owner: credits − usage RU (all three tables) − stored balance. All zeros
 * when every debit stored went with its usage rows.
 */
export function invariantGaps(db: Database.Database): Array<{ id: number; gap: number }> {
  return db.prepare(INVARIANT_GAPS_SQL).all() as Array<{ id: number; gap: number }>;
}

/** The query of `invariantGaps`, the same in SQLite and PostgreSQL: rows of `id` and `gap`. */
export const INVARIANT_GAPS_SQL = `
  SELECT o.id,
    (SELECT coalesce(sum(ru), 0) FROM credits c WHERE c.owner_id = o.id)
    - (SELECT coalesce(sum(ru), 0) FROM usage_minute u WHERE u.owner_id = o.id)
    - (SELECT coalesce(sum(ru), 0) FROM usage_hour u WHERE u.owner_id = o.id)
    - (SELECT coalesce(sum(ru), 0) FROM usage_day u WHERE u.owner_id = o.id)
    - o.ru_balance AS gap
  FROM owners o ORDER BY o.id`;
