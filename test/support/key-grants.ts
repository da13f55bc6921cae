/**
 * What an API key grants, changed for a test: its endpoint's restrictions (in the management API's field
 * names, checked and normalised as a PATCH would be), its owner's suspension and the end of a rotated key's
 * grace. The gateway's key book is wrapped so `key` answers with them; every other key is as the store says.
 *
 * A stand-in until the store keeps these and the management API sets them (issue 31): a test that calls
 * `grantKey` can then set the same fields with `PATCH /api/dashboard/endpoints` instead.
 */
import { compileFences, type FenceOptions } from '../../src/fences/fences.js';
import { applyFencePatch, fenceProblemsText, NO_FENCES } from '../../src/fences/settings.js';
import type { KeyBook } from '../../src/pipeline/tenancy.js';
import type { EndpointAuth } from '../../src/tenancy/key-cache.js';

export interface GrantChange {
  /** Fence fields as the management API takes them (`allowed_origins`, `key_in_path`, ...). */
  fences?: Record<string, unknown>;
  fenceOptions?: FenceOptions;
  suspended?: boolean;
  keyExpiresAtMs?: number | null;
}

/** The changes made to one key book, and the grants they made (one object per key, as the key cache keeps). */
interface Changes {
  byKey: Map<string, (auth: EndpointAuth) => EndpointAuth>;
  made: Map<string, [from: EndpointAuth, to: EndpointAuth]>;
}

const changed = new WeakMap<KeyBook, Changes>();

function wrap(keys: KeyBook): Changes {
  const c: Changes = { byKey: new Map(), made: new Map() };
  const cached = keys.cached.bind(keys);
  const lookUp = keys.lookUp.bind(keys);
  const apply = (k: string, auth: EndpointAuth | null | undefined): EndpointAuth | null | undefined => {
    const f = c.byKey.get(k);
    if (f === undefined || auth == null) return auth;
    const kept = c.made.get(k);
    if (kept !== undefined && kept[0] === auth) return kept[1];
    const next = f(auth);
    c.made.set(k, [auth, next]);
    return next;
  };
  keys.cached = (k) => apply(k, cached(k));
  keys.lookUp = async (k) => apply(k, await lookUp(k)) ?? null;
  changed.set(keys, c);
  return c;
}

/** Has `keys` answer `key` with `change` applied to what the store grants (a later call replaces it). */
export function grantKey(keys: KeyBook, key: string, change: GrantChange): void {
  const c = changed.get(keys) ?? wrap(keys);
  let fences: EndpointAuth['fences'] = null;
  if (change.fences !== undefined) {
    const read = applyFencePatch(NO_FENCES, change.fences);
    if (!read.ok) throw new Error(fenceProblemsText(read.problems));
    fences = compileFences(read.settings, change.fenceOptions);
  }
  c.made.delete(key);
  c.byKey.set(key, (auth) => ({
    ...auth,
    fences,
    suspended: change.suspended ?? false,
    keyExpiresAtMs: change.keyExpiresAtMs ?? null,
  }));
}
