// One function per operator command on owners, keys and endpoints (tenancy.ts parses and checks the
// command line, then `run` calls the command's function): each writes its answer through `io.out`.
import { DEFAULT_KEY_ROLE, isKeyRole, KEY_ROLES } from '../tenancy/roles.js';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { safeUrl } from '../store/pg-open.js';
import { KEY_PREFIX_LENGTH } from '../tenancy/keys.js';
import { nameProblem } from '../tenancy/names.js';
import { MAX_RU } from '../tenancy/owners.js';
import { stringOption } from './args.js';
import { endpointCreate, endpointDelete, endpointRotate, endpointSet } from './endpoint-commands.js';
import { isoTime } from '../api-answers.js';
import { formatTable, formatTime } from './table.js';
import { found, type Io, ownerId, plan, RefusedError, requireRu, UsageError } from './tenancy-io.js';

async function ownerCreate(io: Io, json: boolean): Promise<void> {
  const { args, config, out } = io;
  const name = stringOption(args, 'name')?.trim();
  if (!name) throw new UsageError('missing --name NAME');
  const problem = nameProblem(name);
  if (problem !== null) throw new UsageError(`--name ${problem}`);
  const chosen = plan(config, stringOption(args, 'plan'));
  const ru = requireRu(args, 0);
  const created = await (await io.accounts()).createOwner(name, chosen, ru);
  out(
    json
      ? `${JSON.stringify({ id: created.id, management_key: created.managementKey })}\n`
      : `owner ${created.id} created\nmanagement key (shown once, keep it secret): ${created.managementKey}\n`,
  );
}

async function ownerList(io: Io, json: boolean): Promise<void> {
  const owners = await (await io.accounts()).listOwners();
  if (json) {
    io.out(
      `${JSON.stringify(
        owners.map((o) => ({
          id: o.id,
          name: o.name,
          plan: o.plan,
          ru_balance: o.ruBalance,
          suspended: o.suspended,
          endpoints: o.endpoints,
          created_at: isoTime(o.createdAt),
        })),
      )}\n`,
    );
  } else {
    io.out(
      formatTable(
        ['ID', 'NAME', 'PLAN', 'BALANCE', 'SUSPENDED', 'ENDPOINTS', 'CREATED'],
        owners.map((o) => [
          String(o.id),
          o.name,
          o.plan,
          String(o.ruBalance),
          o.suspended ? 'yes' : 'no',
          String(o.endpoints),
          formatTime(o.createdAt),
        ]),
      ),
    );
  }
}

async function ownerTopUp(io: Io, a: string | undefined): Promise<void> {
  const id = ownerId(a);
  const ru = requireRu(io.args, 1);
  const result = await (await io.accounts()).topUp(id, ru);
  switch (result.kind) {
    case 'credited':
      io.out(`owner ${id}: balance ${result.balance} RU\n`);
      return;
    case 'refused':
      throw new RefusedError(
        result.error === 'no_owner'
          ? `no owner ${id}`
          : `owner ${id}: a top-up of ${ru} RU would take the balance (${result.balance} RU) past the maximum ${MAX_RU} RU`,
      );
    default:
      return result satisfies never;
  }
}

async function ownerSetPlan(io: Io, a: string | undefined, b: string | undefined): Promise<void> {
  const id = ownerId(a);
  const p = plan(io.config, b);
  found(await (await io.accounts()).setPlan(id, p), id);
  io.out(`owner ${id}: plan ${p}\n`);
}

async function ownerKeyCreate(io: Io, json: boolean, a: string | undefined): Promise<void> {
  const id = ownerId(a);
  const asked = io.args.options.get('role') ?? DEFAULT_KEY_ROLE;
  if (!isKeyRole(asked)) throw new UsageError(`--role must be one of ${KEY_ROLES.join(', ')}, got '${String(asked)}'`);
  const key = found(await (await io.accounts()).createManagementKey(id, asked), id);
  io.out(
    json
      ? `${JSON.stringify({ id, role: asked, management_key: key })}\n`
      : `${asked} management key for owner ${id} (shown once, keep it secret): ${key}\n`,
  );
}

async function ownerKeyList(io: Io, json: boolean, a: string | undefined): Promise<void> {
  const id = ownerId(a);
  const keys = found(await (await io.accounts()).listManagementKeys(id), id);
  if (json) {
    const rows = keys.map((k) => ({
      key_prefix: k.keyPrefix,
      role: k.role,
      created_at: isoTime(k.createdAt),
      revoked_at: k.revokedAt === null ? null : isoTime(k.revokedAt),
    }));
    io.out(`${JSON.stringify(rows)}\n`);
    return;
  }
  io.out(
    formatTable(
      ['PREFIX', 'ROLE', 'CREATED', 'REVOKED'],
      keys.map((k) => [k.keyPrefix, k.role, formatTime(k.createdAt), k.revokedAt === null ? '-' : formatTime(k.revokedAt)]),
    ),
  );
}

async function ownerKeyRevoke(io: Io, a: string | undefined, b: string | undefined): Promise<void> {
  const id = ownerId(a);
  if (b === undefined) throw new UsageError(`missing PREFIX (the first ${KEY_PREFIX_LENGTH} characters of the key; see owner key list)`);
  const result = await (await io.accounts()).revokeManagementKey(id, b.slice(0, KEY_PREFIX_LENGTH));
  if (result === 'no_owner') throw new RefusedError(`no owner ${id}`);
  if (result === 'no_key') throw new RefusedError(`owner ${id} has no live management key with prefix '${b}' (see owner key list ${id})`);
  if (result === 'ambiguous') throw new RefusedError(`several live management keys of owner ${id} have the prefix '${b}'`);
  io.out(`owner ${id}: management key ${b.slice(0, KEY_PREFIX_LENGTH)} revoked\n`);
}

async function ownerSuspend(io: Io, suspend: boolean, a: string | undefined): Promise<void> {
  const id = ownerId(a);
  found(await (await io.accounts()).setSuspended(id, suspend), id);
  io.out(`owner ${id}: ${suspend ? 'suspended (its keys are refused)' : 'resumed'}\n`);
}

async function ownerDelete(io: Io, a: string | undefined): Promise<void> {
  const id = ownerId(a);
  const { endpoints } = found(await (await io.accounts()).deleteOwner(id), id);
  io.out(`owner ${id} deleted with ${endpoints} endpoint${endpoints === 1 ? '' : 's'}\n`);
}

async function endpointList(io: Io, json: boolean): Promise<void> {
  const owner = stringOption(io.args, 'owner');
  const of = owner === undefined ? undefined : ownerId(owner, '--owner');
  const rows = await (await io.accounts()).listAllEndpoints(of);
  if (json) {
    io.out(
      `${JSON.stringify(
        rows.map((e) => ({
          id: e.id,
          owner_id: e.ownerId,
          name: e.name,
          network: e.network,
          key_prefix: e.keyPrefix,
          created_at: isoTime(e.createdAt),
        })),
      )}\n`,
    );
  } else {
    io.out(
      formatTable(
        ['ID', 'OWNER', 'NETWORK', 'NAME', 'KEY', 'CREATED'],
        rows.map((e) => [e.id, String(e.ownerId), e.network, e.name ?? '-', `${e.keyPrefix}…`, formatTime(e.createdAt)]),
      ),
    );
  }
}

async function backup(io: Io): Promise<void> {
  const { args, config } = io;
  const target = stringOption(args, 'out');
  if (target === undefined) throw new UsageError('missing --out FILE');
  if (config.storage.url !== undefined) {
    throw new RefusedError(
      `backup copies the SQLite file at storage.path, and this config keeps its data in PostgreSQL (storage.url ${safeUrl(config.storage.url)}): back that up with pg_dump`,
    );
  }
  const file = resolve(target);
  if (file === io.store().path) throw new UsageError('--out is the database itself');
  if (existsSync(file) && !args.options.has('force')) throw new RefusedError(`${target} exists: pass --force to overwrite it`);
  mkdirSync(dirname(file), { recursive: true });
  // SQLite's online backup: a consistent copy while the daemon keeps writing.
  const { totalPages } = await io.store().db.backup(file);
  io.out(`backup written to ${target} (${totalPages} pages)\n`);
}

/** Runs `command` (its words, e.g. `owner key create`) with the positionals after it. */
export async function run(command: string, rest: string[], io: Io): Promise<void> {
  const json = io.args.options.has('json');
  const [a, b] = rest;
  switch (command) {
    case 'owner create':
      return ownerCreate(io, json);
    case 'owner list':
      return ownerList(io, json);
    case 'owner topup':
      return ownerTopUp(io, a);
    case 'owner set-plan':
      return ownerSetPlan(io, a, b);
    case 'owner key create':
      return ownerKeyCreate(io, json, a);
    case 'owner key list':
      return ownerKeyList(io, json, a);
    case 'owner key revoke':
      return ownerKeyRevoke(io, a, b);
    case 'owner suspend':
    case 'owner resume':
      return ownerSuspend(io, command === 'owner suspend', a);
    case 'owner delete':
      return ownerDelete(io, a);
    case 'endpoint create':
      return endpointCreate(io, json);
    case 'endpoint list':
      return endpointList(io, json);
    case 'endpoint delete':
      return endpointDelete(io, a);
    case 'endpoint set':
      return endpointSet(io, json, a);
    case 'endpoint rotate':
      return endpointRotate(io, json, a);
    case 'backup':
      return backup(io);
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}
