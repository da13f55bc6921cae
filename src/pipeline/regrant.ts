/**
 * What becomes of an open connection (a WebSocket, an event stream) when its endpoint changed: deleted,
 * its owner suspended, its restrictions changed, or its key rotated. The key the connection was opened with
 * is looked up again (through the key cache, which the change made forget it): a key that no longer works
 * closes it; one rotated out keeps it open until its grace ends; new restrictions close it, so its client
 * reconnects under them (a connection's calls are checked with the grant it opened with); anything else
 * (the other key of the endpoint rotated, a plan changed) leaves it as it is.
 */
import type { EndpointAuth } from '../tenancy/key-cache.js';
import type { Caller } from './admission.js';
import type { GatewayContext } from './context.js';

/** `revoked`: the key no longer works; `expired`: its grace after a rotation ended; `restricted`: it works under other restrictions. */
export type Regrant = { kind: 'keep' } | { kind: 'close'; why: 'revoked' | 'expired' | 'restricted' } | { kind: 'close_at'; atMs: number };

const KEEP: Regrant = Object.freeze({ kind: 'keep' });
const REVOKED: Regrant = Object.freeze({ kind: 'close', why: 'revoked' });
const RESTRICTED: Regrant = Object.freeze({ kind: 'close', why: 'restricted' });
const EXPIRED: Regrant = Object.freeze({ kind: 'close', why: 'expired' });

export function regrant(ctx: GatewayContext, caller: Caller): Regrant {
  const held = caller.auth;
  if (held === null || caller.key === null) return KEEP;
  // Undefined: a fleet instance that no longer holds the key's answer; closing is the safe side.
  const now = ctx.tenancy.keys.cached(caller.key);
  if (now == null || now.suspended || now.endpointId !== held.endpointId) return REVOKED;
  if (!sameSettings(now, held)) return RESTRICTED;
  if (now.keyExpiresAtMs !== null) return now.keyExpiresAtMs <= ctx.now() ? EXPIRED : { kind: 'close_at', atMs: now.keyExpiresAtMs };
  return KEEP;
}

function sameSettings(a: EndpointAuth, b: EndpointAuth): boolean {
  if (a.fences === b.fences) return true;
  if (a.fences === null || b.fences === null) return false;
  return JSON.stringify(a.fences.settings) === JSON.stringify(b.fences.settings);
}

/** The longest wait a timer takes (about 24.8 days); a later end is waited for in steps. */
const TIMER_MAX_MS = 2_147_483_647;

/** What holds a connection's key-end timer (a WebSocket's, an event stream's), cleared when it closes. */
export interface KeyEndHolder {
  keyEnd: ReturnType<typeof setTimeout> | null;
}

/**
 * Runs `end` when the context's clock reaches `atMs` (at once when it has), the end of a rotated-out key's
 * grace; a timer set before on `holder` is replaced.
 */
export function atKeyEnd(ctx: GatewayContext, holder: KeyEndHolder, atMs: number, end: () => void): void {
  if (holder.keyEnd !== null) clearTimeout(holder.keyEnd);
  holder.keyEnd = null;
  const left = atMs - ctx.now();
  if (left <= 0) return end();
  holder.keyEnd = setTimeout(() => atKeyEnd(ctx, holder, atMs, end), Math.min(left, TIMER_MAX_MS));
  holder.keyEnd.unref?.();
}
