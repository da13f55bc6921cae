/**
 * An endpoint's restrictions (fences/fences.ts) at their two places on the road, the same for every
 * transport: the whole request's (where its key came from, the client's address, its Origin, its signed
 * token) once the caller is known and before the body is read or the upgrade accepted; and each JSON-RPC
 * call's (the key's methods, then its contracts) in planItem, before metering, the cache and shared
 * flights. A key without restrictions pays one compare at each place (`auth.fences === null`).
 */
import { ERRORS } from '../errors.js';
import { FENCE_ERRORS, type FenceRefusal, type KeyPlace, refuseCall, refuseMethod, refuseRequest, refuseToken } from '../fences/fences.js';
import type { EndpointAuth } from '../tenancy/key-cache.js';
import type { Caller } from './admission.js';
import type { CallerRefusal } from './caller.js';

/** What a request's credentials said besides its key: where the key came from, and the signed token sent. */
export interface KeyFacts {
  readonly keyPlace: KeyPlace;
  /** The JWT of `Authorization: Bearer` or a `chaingate.jwt.` subprotocol; undefined when none was sent. */
  readonly token: string | undefined;
}

/** A key in the path and nothing in the headers: what nearly every keyed request brings, made once. */
export const KEY_IN_PATH: KeyFacts = Object.freeze({ keyPlace: 'path', token: undefined });

/** A request's facts the checks read: its Origin ('' when absent) and the client's whole address, asked only when a list needs it. */
export interface RequestSide {
  origin: string;
  address: () => string | Uint8Array;
}

/**
 * Why a keyed request is refused by its endpoint's restrictions, or undefined: the key's place, the client's
 * address, the origin (in that order), then the signed token. A promise only the first time a token is met
 * (its signature is checked then); it never rejects (a check that throws refuses the token: fail closed).
 */
export function fenceRequest(
  auth: EndpointAuth,
  facts: KeyFacts,
  side: RequestSide,
): CallerRefusal | undefined | Promise<CallerRefusal | undefined> {
  const f = auth.fences;
  if (f === null) return undefined;
  // The address is read only when a list of addresses is set: it costs a header or a system call.
  const refused = refuseRequest(f, { origin: side.origin, ip: f.ips === null ? '' : side.address(), keyPlace: facts.keyPlace });
  if (refused !== undefined) return callerRefusal(refused);
  const token = refuseToken(f, facts.token);
  if (!(token instanceof Promise)) return token === undefined ? undefined : callerRefusal(token);
  return token.then(
    (r) => (r === undefined ? undefined : callerRefusal(r)),
    () => callerRefusal({ kind: 'token', message: 'Signed token refused: it could not be checked' }),
  );
}

function callerRefusal(r: FenceRefusal): CallerRefusal {
  return { kind: 'refused', error: FENCE_ERRORS[r.kind], message: r.message };
}

/** A refusal of one call, in the shape of checkCall's refusals, with the error table's row of its kind. */
export interface CallRefusal {
  kind: 'error';
  error: (typeof FENCE_ERRORS)[keyof typeof FENCE_ERRORS];
  message: string;
}

function callRefusal(r: FenceRefusal | undefined): CallRefusal | undefined {
  return r === undefined ? undefined : { kind: 'error', error: FENCE_ERRORS[r.kind], message: r.message };
}

/** Why the key's method list refuses `method` (before its params are read), or undefined. */
export function fenceMethod(caller: Caller, method: string): CallRefusal | undefined {
  const f = caller.auth?.fences;
  if (f == null || f.methods === null) return undefined;
  return callRefusal(refuseMethod(f, method));
}

/**
 * Why the key's contract list refuses a call whose params were validated (and normalised), or undefined; a
 * promise only for an `eth_sendRawTransaction` met while the transaction decoder loads. Never rejects.
 */
export function fenceCall(
  caller: Caller,
  method: string,
  params: readonly unknown[],
): CallRefusal | undefined | Promise<CallRefusal | undefined> {
  const f = caller.auth?.fences;
  if (f == null || !f.checksCalls) return undefined;
  const refused = refuseCall(f, method, params);
  if (!(refused instanceof Promise)) return callRefusal(refused);
  return refused.then(callRefusal, () => ({ kind: 'error', error: 'contract_not_allowed', message: ERRORS.contract_not_allowed.message }));
}
