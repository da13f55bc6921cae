/**
 * The management routes of an endpoint's restrictions and key (issue 31, docs/api.md "Endpoint
 * restrictions"): how an endpoint is shown with its settings, `PATCH /api/dashboard/endpoints?id=` and
 * `POST /api/dashboard/endpoints/rotate?id=`. The settings are read by fences/settings.ts, which names
 * every problem's field; this file only carries them between the body, the store and the answer.
 */
import type { AccountStore, EndpointRecord, OwnerRecord } from '../accounts/account-store.js';
import { type EndpointAnswer, type EndpointSettingsAnswer, type FieldProblem, isoTime, type RotatedKeyAnswer } from '../api-answers.js';
import type { Config } from '../config/schema.js';
import { applyFencePatch, FENCE_FIELDS, type FenceSettings, NO_FENCES } from '../fences/settings.js';
import { fail, fromStore, queryParam, type Reply, refuseFields, send } from './management-io.js';
import { chainUrls } from './public-urls.js';

/** A rotation's grace when the body gives none (24 hours), and the longest one may ask (30 days), in seconds. */
export const ROTATION_GRACE_S = { default: 86_400, max: 2_592_000 } as const;

/** The settings as the API shows them: the stored ones, copied out of their frozen lists. */
export function settingsView(f: FenceSettings): EndpointSettingsAnswer {
  const copy = (l: readonly string[] | null) => (l === null ? null : [...l]);
  return {
    allowed_origins: copy(f.allowed_origins),
    allow_no_origin: f.allow_no_origin,
    allowed_ips: copy(f.allowed_ips),
    allowed_methods: copy(f.allowed_methods),
    allowed_contracts: copy(f.allowed_contracts),
    key_in_path: f.key_in_path,
    jwt_keys:
      f.jwt_keys === null
        ? null
        : f.jwt_keys.map((k) => (k.jwk !== undefined ? { id: k.id, alg: k.alg, jwk: k.jwk } : { id: k.id, alg: k.alg, pem: k.pem ?? '' })),
    jwt_max_lifetime_s: f.jwt_max_lifetime_s,
  };
}

/**
 * An endpoint as its owner sees it, with its settings; a previous key is shown while its grace lasts
 * (`nowS`, unix seconds), and not once it ended, whatever the store still holds.
 */
export function endpointView(e: EndpointRecord, nowS = Date.now() / 1000): EndpointAnswer {
  const inGrace = e.previousKeyExpiresAt !== null && e.previousKeyExpiresAt > nowS;
  return {
    id: e.id,
    name: e.name,
    network: e.network,
    key_prefix: e.keyPrefix,
    created_at: isoTime(e.createdAt),
    ...settingsView(e.fences),
    previous_key_prefix: inGrace ? e.previousKeyPrefix : null,
    previous_key_expires_at: inGrace ? isoTime(e.previousKeyExpiresAt!) : null,
  };
}

/** The endpoint's id from `?id=`, or the refusal already sent. */
function endpointId(query: string, reply: Reply): string | null {
  const id = queryParam(query, 'id');
  if (id === null) fail(reply, 'bad_request', "'id' is given more than once");
  else if (id === undefined || id === '') fail(reply, 'bad_request', "'id' is required (query ?id=)");
  else return id;
  return null;
}

/**
 * `PATCH /api/dashboard/endpoints?id=`: the settings in the body change, a field left out stays, `null`
 * clears it; a field that is not a setting is refused by name (a misspelt one must not pass as "no
 * change"). Every problem in one 400; another owner's id is the 404 of an unknown one.
 */
export async function handlePatch(
  accounts: AccountStore,
  owner: OwnerRecord,
  query: string,
  body: Record<string, unknown> | string,
  reply: Reply,
): Promise<void> {
  const id = endpointId(query, reply);
  if (id === null) return;
  if (typeof body === 'string') return fail(reply, 'bad_request', body);
  const unknown: FieldProblem[] = Object.keys(body)
    .filter((k) => !(FENCE_FIELDS as readonly string[]).includes(k))
    .map((field) => ({ field, message: `is not a setting one can change (settings: ${FENCE_FIELDS.join(', ')})` }));
  // Checked before the store is asked (the problems do not depend on the stored values), and again in its transaction.
  const checked = applyFencePatch(NO_FENCES, body);
  const problems = [...unknown, ...(checked.ok ? [] : checked.problems)];
  if (problems.length > 0) return refuseFields(reply, problems);
  const patched = await fromStore(() => accounts.patchEndpointFences(owner.id, id, (current) => applyFencePatch(current, body)));
  if (patched === null) return fail(reply, 'not_found', `No endpoint ${id}`);
  if (!patched.ok) return refuseFields(reply, patched.problems);
  send(reply, 200, endpointView(patched.endpoint));
}

/**
 * `POST /api/dashboard/endpoints/rotate?id=` with `{"grace_s": N}`: a new key, shown once with its URLs;
 * the old key keeps working for N seconds (default 24 h; 0 refuses it at once).
 */
export async function handleRotate(
  config: Config,
  accounts: AccountStore,
  owner: OwnerRecord,
  query: string,
  body: Record<string, unknown> | string,
  reply: Reply,
): Promise<void> {
  const id = endpointId(query, reply);
  if (id === null) return;
  if (typeof body === 'string') return fail(reply, 'bad_request', body);
  const grace = body.grace_s ?? ROTATION_GRACE_S.default;
  if (typeof grace !== 'number' || !Number.isInteger(grace) || grace < 0 || grace > ROTATION_GRACE_S.max) {
    return refuseFields(reply, [
      { field: 'grace_s', message: `must be a whole number of seconds from 0 (at once) to ${ROTATION_GRACE_S.max} (30 days)` },
    ]);
  }
  const rotated = await fromStore(() => accounts.rotateEndpointKey(owner.id, id, grace));
  if (rotated === null) return fail(reply, 'not_found', `No endpoint ${id}`);
  const urls = chainUrls(config, rotated.endpoint.network, rotated.apiKey);
  const answer: RotatedKeyAnswer = {
    api_key: rotated.apiKey,
    https_url: urls.https,
    wss_url: urls.wss,
    previous_key_expires_at: rotated.previousKeyExpiresAt === null ? null : isoTime(rotated.previousKeyExpiresAt),
  };
  send(reply, 200, answer);
}
