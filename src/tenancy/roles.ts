/**
 * The roles of an owner's management keys (issue 36 §4): what each key may do through the management API.
 * `admin` may do everything; `developer` manages endpoints (create, change, rotate, delete) and reads usage,
 * but not the owner's alerts; `viewer` only reads. Keys made before roles existed are admins (the migration's
 * default), so nothing an owner could do is taken away.
 */
export const KEY_ROLES = ['admin', 'developer', 'viewer'] as const;
export type KeyRole = (typeof KEY_ROLES)[number];

/** The role a new key gets when none is asked for: the owner's first key, and `owner key create` without --role. */
export const DEFAULT_KEY_ROLE: KeyRole = 'admin';

export function isKeyRole(v: unknown): v is KeyRole {
  return typeof v === 'string' && (KEY_ROLES as readonly string[]).includes(v);
}

/** A stored role read back; anything unknown (an operator's hand edit) is read as the least, `viewer`: fail closed. */
export function storedRole(v: unknown): KeyRole {
  return isKeyRole(v) ? v : 'viewer';
}
