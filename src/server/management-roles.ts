/**
 * What each role of a management key may do through the management API (issue 36 §4; tenancy/roles.ts
 * names the roles). Reading is every role's; changing endpoints (create, restrictions, rotation, delete) is
 * an admin's or a developer's; changing webhooks (the owner's alerts and where they go) is an admin's.
 * A refusal is 403 `role_refused`, naming the role and what it may do.
 */
import type { KeyRole } from '../tenancy/roles.js';

/** The roles that may change through each route; a route not named here only reads. */
const WRITERS: ReadonlyMap<string, readonly KeyRole[]> = new Map([
  ['/api/dashboard/endpoints', ['admin', 'developer']],
  ['/api/dashboard/endpoints/rotate', ['admin', 'developer']],
  ['/api/dashboard/webhooks', ['admin']],
]);

const CAN: Record<KeyRole, string> = {
  admin: 'everything',
  developer: 'read, and change endpoints',
  viewer: 'read only',
};

/** Null when `role` may send `verb` to `route`; else the refusal's message. */
export function roleRefusal(role: KeyRole, verb: string, route: string): string | null {
  if (verb === 'GET') return null;
  const writers = WRITERS.get(route) ?? ['admin'];
  if (writers.includes(role)) return null;
  return `A ${role} key may not ${verb} ${route} (a ${role} key may: ${CAN[role]}; ask an admin of this account)`;
}
