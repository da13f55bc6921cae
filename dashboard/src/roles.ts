import type { Account } from './api.js';

/**
 * What the signed-in key may do, shown by hiding what it may not (issue 36 §4): the page's `data-role`
 * drives teams.css, which hides `.needs-developer` from a viewer (endpoint changes) and `.needs-admin` from
 * all but an admin (webhook changes). The API refuses them anyway (403 `role_refused`); hiding spares the click.
 */
export function applyRole(account: Account | null): void {
  const role = account?.role ?? 'viewer';
  document.body.dataset.role = role;
}

/** What each role may do, said beside the owner's name. */
export const ROLE_TEXT: Readonly<Record<Account['role'], string>> = {
  admin: 'admin: everything',
  developer: 'developer: endpoints and usage',
  viewer: 'viewer: read only',
};
