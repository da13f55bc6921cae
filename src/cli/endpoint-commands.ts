// The operator commands on one endpoint: `endpoint create` (issue 34: for an owner, within its plan's
// limit, as the management API makes one), `endpoint delete ID`, and its restrictions and key (issue 31):
// `endpoint set ID --flags` and `endpoint rotate ID [--grace D]`. The flags are turned into the management API's body (one flag per
// field, `none` clears it) and checked by fences/settings.ts, whose problems come back named by flag.
import { readFileSync } from 'node:fs';
import { createEndpointWithinPlan } from '../accounts/account-store.js';
import { applyFencePatch, type FenceProblem, type FenceSettings, NO_FENCES } from '../fences/settings.js';
import { endpointView, ROTATION_GRACE_S } from '../server/management-fences.js';
import { errorText } from '../log.js';
import { nameProblem } from '../tenancy/names.js';
import { type ParsedArgs, stringOption } from './args.js';
import { SETTING_OPTIONS } from './commands.js';
import { isoTime } from '../api-answers.js';
import { formatTable, formatTime } from './table.js';
import { type Io, ownerId as ownerIdOf, RefusedError, UsageError } from './tenancy-io.js';

/** Each flag of `endpoint set` and the settings field it writes, in the order `--help` lists them. */
const SETTING_FLAGS: Readonly<Record<string, keyof FenceSettings>> = Object.freeze(
  Object.fromEntries(SETTING_OPTIONS.map((o) => [o.name, o.field])),
);

const FLAG_OF: ReadonlyMap<string, string> = new Map(SETTING_OPTIONS.map((o) => [o.field, o.name]));

/** Comma-separated entries (repeated flags are joined with commas by the argument reader). */
const entries = (v: string): string[] =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

/**
 * A duration: whole seconds, or with a unit (`90s`, `15m`, `24h`, `7d`); a string is what is wrong with
 * it, for the caller to name its flag.
 */
export function parseDuration(v: string): number | string {
  const m = /^(\d{1,9})(s|m|h|d)?$/.exec(v.trim());
  if (m === null) return `must be whole seconds or a duration such as 90s, 15m, 24h, 7d; got '${v}'`;
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86_400 }[(m[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
}

/** `id:alg:FILE`, FILE a PEM (SPKI) or a JWK in JSON; the key is read here, checked by settings.ts. */
function jwtKey(entry: string): Record<string, unknown> {
  const m = /^([^:]+):([^:]+):(.+)$/.exec(entry);
  if (m === null) throw new UsageError(`--jwt-key takes id:alg:FILE (FILE a PEM or a JWK in JSON), got '${entry}'`);
  const [, id, alg, file] = m as unknown as [string, string, string, string];
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (e) {
    throw new UsageError(`--jwt-key ${id}: cannot read ${file}: ${errorText(e)}`);
  }
  if (text.startsWith('-----BEGIN')) return { id, alg, pem: text };
  try {
    return { id, alg, jwk: JSON.parse(text) as unknown };
  } catch {
    throw new UsageError(`--jwt-key ${id}: ${file} is neither a PEM nor a JWK in JSON`);
  }
}

/** The flag's value as the body's: `none` clears (null); a usage error names the flag. */
function fieldValue(flag: string, v: string): unknown {
  if (v === 'none') return null;
  switch (SETTING_FLAGS[flag]) {
    case 'allow_no_origin':
    case 'key_in_path':
      if (v !== 'true' && v !== 'false') throw new UsageError(`--${flag} must be true, false or none, got '${v}'`);
      return v === 'true';
    case 'jwt_max_lifetime_s': {
      const s = parseDuration(v);
      if (typeof s === 'string') throw new UsageError(`--${flag} ${s}`);
      return s;
    }
    case 'jwt_keys':
      return entries(v).map(jwtKey);
    default:
      return entries(v);
  }
}

/** `allowed_ips[3]` as `--allowed-ips (entry 4)`, so a problem names the flag the operator typed. */
function flagProblem(p: FenceProblem): string {
  const m = /^([a-z_]+)(?:\[(\d+)\])?(.*)$/.exec(p.field);
  const flag = FLAG_OF.get(m?.[1] ?? '') ?? p.field;
  const entry = m?.[2] === undefined ? '' : ` (entry ${Number(m[2]) + 1}${m[3] ? `, ${m[3].replace(/^\./, '')}` : ''})`;
  return `--${flag}${entry}: ${p.message}`;
}

/** The body `endpoint set`'s flags make, checked (every problem at once, as a usage error). */
export function settingsBody(args: ParsedArgs): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [flag, field] of Object.entries(SETTING_FLAGS)) {
    const v = stringOption(args, flag);
    if (v !== undefined) body[field] = fieldValue(flag, v);
  }
  if (Object.keys(body).length === 0) {
    throw new UsageError(
      `endpoint set needs at least one of ${Object.keys(SETTING_FLAGS)
        .map((f) => `--${f}`)
        .join(', ')}`,
    );
  }
  const checked = applyFencePatch(NO_FENCES, body);
  if (!checked.ok) throw new UsageError(checked.problems.map(flagProblem).join('\n'));
  return body;
}

/** The owner of a live endpoint (the store's calls act for an owner), or a refusal naming the id. */
async function ownerOf(io: Io, id: string | undefined): Promise<{ id: string; ownerId: number }> {
  if (id === undefined) throw new UsageError('missing endpoint ID (see endpoint list)');
  const row = (await (await io.accounts()).listAllEndpoints()).find((e) => e.id === id);
  if (row === undefined) throw new RefusedError(`no endpoint ${id}`);
  return { id, ownerId: row.ownerId };
}

const shown = (l: readonly string[] | null): string => (l === null ? 'any' : l.join(', '));

/** The settings as a table an operator reads: one row per setting. */
export function settingsTable(s: FenceSettings): string {
  return formatTable(
    ['SETTING', 'VALUE'],
    [
      ['allowed_origins', shown(s.allowed_origins)],
      ['allow_no_origin', String(s.allow_no_origin)],
      ['allowed_ips', shown(s.allowed_ips)],
      ['allowed_methods', s.allowed_methods === null ? "the plan's" : s.allowed_methods.join(', ')],
      ['allowed_contracts', shown(s.allowed_contracts)],
      ['key_in_path', String(s.key_in_path)],
      ['jwt_keys', s.jwt_keys === null ? 'no token required' : s.jwt_keys.map((k) => `${k.id} (${k.alg})`).join(', ')],
      ['jwt_max_lifetime_s', String(s.jwt_max_lifetime_s)],
    ],
  );
}

export async function endpointSet(io: Io, json: boolean, a: string | undefined): Promise<void> {
  if (a === undefined) throw new UsageError('missing endpoint ID (see endpoint list)');
  const body = settingsBody(io.args);
  const { id, ownerId } = await ownerOf(io, a);
  const patched = await (await io.accounts()).patchEndpointFences(ownerId, id, (current) => applyFencePatch(current, body));
  if (patched === null) throw new RefusedError(`no endpoint ${id}`);
  if (!patched.ok) throw new UsageError(patched.problems.map(flagProblem).join('\n'));
  const s = patched.endpoint.fences;
  io.out(json ? `${JSON.stringify({ id, ...s })}\n` : `endpoint ${id}: settings saved\n${settingsTable(s)}`);
}

export async function endpointRotate(io: Io, json: boolean, a: string | undefined): Promise<void> {
  if (a === undefined) throw new UsageError('missing endpoint ID (see endpoint list)');
  const graceText = stringOption(io.args, 'grace');
  const grace = graceText === undefined ? ROTATION_GRACE_S.default : parseDuration(graceText);
  if (typeof grace === 'string') throw new UsageError(`--grace ${grace}`);
  if (grace > ROTATION_GRACE_S.max) throw new UsageError(`--grace must be at most 30d (${ROTATION_GRACE_S.max} seconds)`);
  const { id, ownerId } = await ownerOf(io, a);
  const rotated = await (await io.accounts()).rotateEndpointKey(ownerId, id, grace);
  if (rotated === null) throw new RefusedError(`no endpoint ${id}`);
  const ends = rotated.previousKeyExpiresAt;
  if (json) {
    const expires = ends === null ? null : isoTime(ends);
    io.out(`${JSON.stringify({ id, api_key: rotated.apiKey, previous_key_expires_at: expires })}\n`);
    return;
  }
  const previous = rotated.endpoint.previousKeyPrefix;
  io.out(
    `endpoint ${id}: new API key (shown once, keep it secret): ${rotated.apiKey}\n` +
      (ends === null
        ? 'the previous key is refused from now on\n'
        : `the previous key${previous === null ? '' : ` (${previous}…)`} works until ${formatTime(ends)}\n`),
  );
}

/** The chain an endpoint is made for: --chain, which the config must list, or the config's only chain. */
function chainOf(io: Io): string {
  const slugs = Object.keys(io.config.chains);
  const asked = stringOption(io.args, 'chain');
  if (slugs.length === 0) throw new RefusedError('the config lists no chains (chains:), so an endpoint can serve none');
  if (asked === undefined) {
    if (slugs.length === 1) return slugs[0]!;
    throw new UsageError(`missing --chain SLUG: the config has several chains (${slugs.join(', ')})`);
  }
  if (!Object.hasOwn(io.config.chains, asked)) throw new UsageError(`--chain: unknown chain '${asked}' (chains: ${slugs.join(', ')})`);
  return asked;
}

/**
 * `endpoint create --owner ID --name NAME [--chain SLUG]`: what `POST /api/dashboard/endpoints` does for
 * the owner, with the same checks: a name nameProblem accepts, a configured chain, a live owner and its
 * plan's max_endpoints (counted and inserted in one transaction by the account store). The key is shown
 * once; the JSON is the API's answer less its URLs (the CLI reads no server section), plus owner_id.
 */
export async function endpointCreate(io: Io, json: boolean): Promise<void> {
  const owner = ownerIdOf(stringOption(io.args, 'owner'), '--owner');
  const name = stringOption(io.args, 'name')?.trim();
  if (!name) throw new UsageError('missing --name NAME');
  const problem = nameProblem(name);
  if (problem !== null) throw new UsageError(`--name ${problem}`);
  const chain = chainOf(io);
  const accounts = await io.accounts();
  const record = await accounts.owner(owner);
  if (record === null) throw new RefusedError(`no owner ${owner}`);
  if (record.suspended) throw new RefusedError(`owner ${owner} is suspended: its keys are refused (owner resume ${owner} first)`);
  const made = await createEndpointWithinPlan(accounts, io.config.plans, record, chain, name);
  if (made.kind === 'refused') {
    throw new RefusedError(
      made.error === 'limit' ? `${made.limit} (owner ${owner}; plans.${record.plan}.max_endpoints)` : `no owner ${owner}`,
    );
  }
  const e = made.endpoint;
  io.out(
    json
      ? `${JSON.stringify({ ...endpointView(e), owner_id: owner, api_key: made.apiKey })}\n`
      : `endpoint ${e.id} created for owner ${owner} on ${chain}\nAPI key (shown once, keep it secret): ${made.apiKey}\n`,
  );
}

/** `endpoint delete ID`: the daemon refuses its key and closes its connections once it sees the change (within a second). */
export async function endpointDelete(io: Io, a: string | undefined): Promise<void> {
  const { id, ownerId } = await ownerOf(io, a);
  if (!(await (await io.accounts()).deleteEndpoint(ownerId, id))) throw new RefusedError(`no endpoint ${id}`);
  io.out(`endpoint ${id} deleted: its key is refused from now on\n`);
}
