import t from 'tap';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import type { Config } from '../../src/config/schema.js';
import { validateConfig } from '../../src/config/schema.js';
import { createLedger } from '../../src/metering/ledger.js';
import { createDirectory } from '../../src/tenancy/directory.js';
import { openStore } from '../../src/store/open.js';
import { MAX_RU } from '../../src/tenancy/owners.js';
import { type CliRun, runTenancy } from '../support/tenancy-cli.js';
import { invariantGaps, type Teardown, tempDbPath, tempStore } from '../store/temp-store.js';

function configFor(path: string): Config {
  const r = validateConfig({ storage: { path }, chains: { mainnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } } });
  if (!r.ok) throw new Error(r.errors.join('; '));
  return r.config;
}

/** A config over a new database (made as serve makes it: the CLI makes none), and a runner of commands on it. */
function cli(t: Teardown): { path: string; config: Config; run: (...argv: string[]) => Promise<CliRun> } {
  const path = tempDbPath(t);
  openStore(path).close();
  const config = configFor(path);
  return { path, config, run: (...argv) => runTenancy(config, ...argv) };
}

async function createOwner(
  run: (...argv: string[]) => Promise<CliRun>,
  ...extra: string[]
): Promise<{ id: number; management_key: string }> {
  const r = await run('owner', 'create', '--name', 'acme', '--plan', 'growth', '--ru', '1000', '--json', ...extra);
  if (r.code !== 0) throw new Error(r.err);
  return JSON.parse(r.out) as { id: number; management_key: string };
}

t.test('owner create, list, topup, set-plan, suspend, resume', async (t) => {
  const { path, run } = cli(t);
  const created = await createOwner(run);
  t.equal(created.id, 1);
  t.match(created.management_key, /^[0-9A-Za-z]{48}$/);
  const text = await run('owner', 'create', '--name', 'Beta Corp', '--plan', 'free', '--ru', '0');
  t.equal(text.code, 0);
  t.match(text.out, /^owner 2 created\nmanagement key \(shown once, keep it secret\): [0-9A-Za-z]{48}\n$/);

  t.same(await run('owner', 'topup', '1', '--ru', '500'), { code: 0, out: 'owner 1: balance 1500 RU\n', err: '' });
  t.same(await run('owner', 'set-plan', '2', 'premium'), { code: 0, out: 'owner 2: plan premium\n', err: '' });
  t.equal((await run('owner', 'suspend', '2')).code, 0);
  const list = await run('owner', 'list');
  t.equal(list.code, 0);
  const [header, row1, row2] = list.out.trimEnd().split('\n');
  t.match(header, /^ID\s+NAME\s+PLAN\s+BALANCE\s+SUSPENDED\s+ENDPOINTS\s+CREATED$/);
  t.match(row1, /^1\s+acme\s+growth\s+1500\s+no\s+0\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
  t.match(row2, /^2\s+Beta Corp\s+premium\s+0\s+yes\s+0\s+/);
  t.equal((await run('owner', 'resume', '2')).code, 0);
  const json = JSON.parse((await run('owner', 'list', '--json')).out) as Array<Record<string, unknown>>;
  t.match(json, [
    { id: 1, name: 'acme', plan: 'growth', ru_balance: 1500, suspended: false, endpoints: 0 },
    { id: 2, name: 'Beta Corp', plan: 'premium', ru_balance: 0, suspended: false, endpoints: 0 },
  ]);
  const db = new Database(path, { readonly: true });
  t.teardown(() => db.close());
  t.same(db.prepare('SELECT owner_id, ru FROM credits ORDER BY id').all(), [
    { owner_id: 1, ru: 1000 },
    { owner_id: 1, ru: 500 },
  ]);
  t.same(invariantGaps(db), [
    { id: 1, gap: 0 },
    { id: 2, gap: 0 },
  ]);
});

t.test('bad arguments are named, with exit status 2; refusals exit 1', async (t) => {
  const { run } = cli(t);
  const plans = await run('owner', 'create', '--name', 'x', '--plan', 'gold', '--ru', '1');
  t.equal(plans.code, 2);
  t.match(plans.err, "unknown plan 'gold' (plans: free, growth, premium)");
  t.match((await run('owner', 'create', '--plan', 'free', '--ru', '1')).err, 'missing --name NAME');
  t.match((await run('owner', 'create', '--name', 'x', '--plan', 'free')).err, 'missing --ru N');
  t.match(
    (await run('owner', 'create', '--name', 'x', '--plan', 'free', '--ru', '-5')).err,
    '--ru must be a decimal integer from 0 to 9007199254740991',
  );
  t.match((await run('owner', 'topup', '1', '--ru', '0')).err, '--ru must be a decimal integer from 1 to 9007199254740991');
  t.match((await run('owner', 'topup', 'abc', '--ru', '5')).err, "owner ID must be a positive integer, got 'abc'");
  t.match((await run('owner', 'topup', '--ru', '5')).err, 'missing owner ID');
  t.match((await run('owner', 'list', '--ru', '5')).err, 'owner list takes no --ru');
  t.match((await run('owner', 'list', '--colour')).err, 'unknown option --colour');
  t.match((await run('owner', 'suspend', '1', '2')).err, "unexpected argument '2'");
  t.match((await run('owner', 'frobnicate')).err, "unknown command 'owner frobnicate'");
  const bare = await run();
  t.same([bare.code, bare.err], [0, ''], 'no command: the overview');
  t.match(bare.out, /^chaingate: a gateway/);
  t.equal((await run('owner', 'set-plan', '1', 'gold')).code, 2);
  for (const argv of [
    ['owner', 'topup', '9', '--ru', '5'],
    ['owner', 'set-plan', '9', 'free'],
    ['owner', 'suspend', '9'],
    ['owner', 'resume', '9'],
    ['owner', 'delete', '9'],
    ['owner', 'key', 'create', '9'],
    ['owner', 'key', 'list', '9'],
    ['owner', 'key', 'revoke', '9', 'abcdefgh'],
  ]) {
    const r = await run(...argv);
    t.same([r.code, r.err], [1, 'chaingate: no owner 9\n'], argv.join(' '));
  }
  const help = await run('owner', 'create', '--help');
  t.equal(help.code, 0);
  t.match(help.out, /^Usage: chaingate owner create --name NAME --plan PLAN --ru N/);
  t.equal((await run('owner', 'list', '--config', '/whatever.yaml')).code, 0, '--config is accepted and left to the caller');
});

t.test('management keys: create, list, revoke, and the daemon refuses a revoked key', async (t) => {
  const { path, run } = cli(t);
  const { id, management_key: first } = await createOwner(run);
  const dir = createDirectory(tempStore(t, path));
  t.equal(dir.ownerByManagementKey(first)!.id, id);
  const second = JSON.parse((await run('owner', 'key', 'create', String(id), '--json')).out) as { management_key: string };
  t.match(
    (await run('owner', 'key', 'create', String(id))).out,
    /^admin management key for owner 1 \(shown once, keep it secret\): [0-9A-Za-z]{48}\n$/,
  );
  const listed = await run('owner', 'key', 'list', String(id));
  t.match(listed.out, /^PREFIX\s+ROLE\s+CREATED\s+REVOKED\n/);
  t.match(listed.out, new RegExp(`\\n${first.slice(0, 8)}\\s+admin\\s+\\d{4}-`));
  t.equal(listed.out.split('\n').filter((l) => l.endsWith(' -')).length, 3, 'three live keys');
  // A key with a role (issue 36 §4), and a role that does not exist refused with the ones that do.
  const viewer = JSON.parse((await run('owner', 'key', 'create', String(id), '--role', 'viewer', '--json')).out) as {
    role: string;
    management_key: string;
  };
  t.equal(viewer.role, 'viewer');
  t.equal(dir.ownerByManagementKey(viewer.management_key)!.role, 'viewer');
  const wrong = await run('owner', 'key', 'create', String(id), '--role', 'owner');
  t.equal(wrong.code, 2);
  t.match(wrong.err, /--role must be one of admin, developer, viewer, got 'owner'/);
  t.same(await run('owner', 'key', 'revoke', String(id), first.slice(0, 8)), {
    code: 0,
    out: `owner 1: management key ${first.slice(0, 8)} revoked\n`,
    err: '',
  });
  t.equal(dir.ownerByManagementKey(first), null);
  t.equal(dir.ownerByManagementKey(second.management_key)!.id, id);
  const again = await run('owner', 'key', 'revoke', String(id), first.slice(0, 8));
  t.equal(again.code, 1);
  t.match(again.err, 'no live management key with prefix');
  t.equal((await run('owner', 'key', 'revoke', String(id))).code, 2);
});

t.test('owner delete takes its endpoints; endpoint list; the daemon learns it on refresh', async (t) => {
  const { path, run } = cli(t);
  const a = await createOwner(run);
  const b = await createOwner(run);
  const dir = createDirectory(tempStore(t, path));
  const eps = [a.id, a.id, b.id].map((owner, i) => {
    const r = dir.createEndpoint(owner, 'mainnet', i === 0 ? 'prod' : undefined, 10);
    if (r.kind === 'refused') throw new Error(r.error);
    return r;
  });
  const listed = await run('endpoint', 'list');
  t.equal(listed.out.trimEnd().split('\n').length, 4);
  t.match(listed.out, new RegExp(`${eps[0]!.endpoint.id}\\s+1\\s+mainnet\\s+prod\\s+${eps[0]!.endpoint.keyPrefix}…`));
  t.notMatch(listed.out, eps[0]!.apiKey, 'never the key itself');
  const own = JSON.parse((await run('endpoint', 'list', '--owner', String(b.id), '--json')).out) as Array<{ id: string; owner_id: number }>;
  t.same(
    own.map((e) => [e.id, e.owner_id]),
    [[eps[2]!.endpoint.id, b.id]],
  );
  t.match((await run('endpoint', 'list', '--owner', 'x')).err, "--owner must be a positive integer, got 'x'");
  t.match((await run('owner', 'list')).out, /\n1\s+acme\s+growth\s+1000\s+no\s+2\s/);

  dir.refreshIfChanged();
  t.same(await run('owner', 'delete', String(a.id)), { code: 0, out: 'owner 1 deleted with 2 endpoints\n', err: '' });
  t.ok(dir.refreshIfChanged());
  t.same(dir.takeRevokedEndpointIds().sort(), [eps[0]!.endpoint.id, eps[1]!.endpoint.id].sort());
  t.equal(dir.endpointByKey(eps[0]!.apiKey), null);
  t.equal(dir.ownerByManagementKey(a.management_key), null);
  t.ok(dir.endpointByKey(eps[2]!.apiKey));
  t.equal((await run('endpoint', 'list')).out.trimEnd().split('\n').length, 2);
  t.notMatch((await run('owner', 'list')).out, /acme\s+growth\s+1000\s+no\s+2/);
  t.equal((await run('owner', 'delete', String(a.id))).code, 1, 'twice: no such owner');
});

t.test('CLI top-ups and suspensions while a daemon connection meters', async (t) => {
  const { path, run } = cli(t);
  const { id, management_key } = await createOwner(run, '--ru', '100');
  const daemon = tempStore(t, path);
  const dir = createDirectory(daemon);
  const ledger = createLedger(daemon, { flushIntervalMs: 60_000 });
  t.teardown(() => ledger.close());
  const r = dir.createEndpoint(id, 'mainnet', undefined, 10);
  if (r.kind === 'refused') throw new Error(r.error);
  t.equal(dir.refreshIfChanged(), false, 'the owner existed before this connection opened');
  ledger.settle(ledger.reserve(id, 60)!, 60, { endpointId: r.endpoint.id, method: 'eth_call', status: 0 });
  t.equal(ledger.reserve(id, 41), null);

  t.equal((await run('owner', 'topup', String(id), '--ru', '1000')).out, 'owner 1: balance 1100 RU\n', 'the CLI sees only flushed debits');
  t.equal(dir.refreshIfChanged(), true);
  ledger.reload();
  t.equal(ledger.available(id), 1040);
  t.ok(ledger.flush());
  t.equal(dir.refreshIfChanged(), false, "the daemon's own flush is not another connection's change");
  t.match((await run('owner', 'list')).out, /\n1\s+acme\s+growth\s+1040\s/);

  t.equal(dir.endpointByKey(r.apiKey)!.plan, 'growth');
  t.equal((await run('owner', 'set-plan', String(id), 'premium')).code, 0);
  t.equal(dir.endpointByKey(r.apiKey)!.plan, 'growth', 'cached until the refresh');
  t.equal(dir.refreshIfChanged(), true);
  t.equal(dir.endpointByKey(r.apiKey)!.plan, 'premium');
  t.equal((await run('owner', 'suspend', String(id))).code, 0);
  t.equal(dir.refreshIfChanged(), true);
  // Known, and answered 403 owner_suspended rather than the 401 of a typo (issue 31, section 5).
  t.equal(dir.endpointByKey(r.apiKey)?.suspended, true, "the suspended owner's key is told apart");
  t.equal(dir.ownerByManagementKey(management_key)?.suspended, true, 'and its management key');
  t.same(dir.takeRevokedEndpointIds(), [r.endpoint.id]);
  t.same(invariantGaps(daemon.db), [{ id, gap: 0 }]);
});

t.test('backup: an online copy, refusing to overwrite without --force', async (t) => {
  const { path, run } = cli(t);
  const { id } = await createOwner(run);
  const daemon = tempStore(t, path);
  const ledger = createLedger(daemon, { flushIntervalMs: 60_000 });
  t.teardown(() => ledger.close());
  ledger.settle(ledger.reserve(id, 10)!, 10, { endpointId: 'ep_a', method: 'eth_call', status: 0 });
  ledger.flush();
  const out = join(dirname(path), 'backups', 'copy.db');
  const r = await run('backup', '--out', out);
  t.equal(r.code, 0);
  t.match(r.out, /^backup written to .*copy\.db \(\d+ pages\)\n$/);
  const copy = new Database(out, { readonly: true });
  t.equal(copy.prepare('SELECT ru_balance FROM owners WHERE id = ?').pluck().get(id), 990);
  t.same(invariantGaps(copy), [{ id, gap: 0 }]);
  copy.close();
  const again = await run('backup', '--out', out);
  t.equal(again.code, 1);
  t.match(again.err, 'exists: pass --force to overwrite it');
  t.equal((await run('backup', '--out', out, '--force')).code, 0);
  t.equal((await run('backup', '--out', path)).code, 2, 'not onto the database itself');
  t.match((await run('backup')).err, 'missing --out FILE');
});

t.test('names: control, format and separator characters and over-long names exit 2 naming --name', async (t) => {
  const { path, run } = cli(t);
  const refused = async (name: string): Promise<string> => {
    const r = await run('owner', 'create', '--name', name, '--plan', 'free', '--ru', '1');
    t.equal(r.code, 2, 'exit 2');
    return r.err.split('\n')[0]!;
  };
  const chars = 'must not contain control, format or line-separator characters';
  t.equal(await refused('acme\n2  forged'), `chaingate: --name ${chars} (found U+000A)`);
  t.equal(await refused('\u001b[31mred'), `chaingate: --name ${chars} (found U+001B)`);
  t.equal(await refused('nul\u0000'), `chaingate: --name ${chars} (found U+0000)`);
  t.equal(await refused('lone\ud800'), `chaingate: --name ${chars} (found U+D800)`);
  t.equal(await refused('para\u2029graph'), `chaingate: --name ${chars} (found U+2029)`);
  t.equal(await refused('x'.repeat(101)), 'chaingate: --name must be 1 to 100 characters, got 101');
  t.equal(
    (await run('owner', 'create', '--name', ' \n ', '--plan', 'free', '--ru', '1')).err.split('\n')[0],
    'chaingate: missing --name NAME',
  );
  const ok = await run('owner', 'create', '--name', ` ${'🦊'.repeat(100)} `, '--plan', 'free', '--ru', '1', '--json');
  t.equal(ok.code, 0, '100 code points (200 UTF-16 units), after trimming');
  const db = new Database(path, { readonly: true });
  t.teardown(() => db.close());
  t.same(db.prepare('SELECT id, name FROM owners').all(), [{ id: 1, name: '🦊'.repeat(100) }], 'only the valid name was stored');
});

t.test('--ru is decimal digits from 1 (0 at creation) to 2^53 - 1, and no top-up takes a balance past that', async (t) => {
  const { path, run } = cli(t);
  const { id } = await createOwner(run);
  const message = 'chaingate: --ru must be a decimal integer from 1 to 9007199254740991';
  for (const ru of ['0x10', '1e3', '+5', '1.0', ' 5', '5 ', '0b11', '9007199254740992', '99999999999999999999']) {
    const r = await run('owner', 'topup', String(id), '--ru', ru);
    t.same([r.code, r.err.split('\n')[0]], [2, message], `--ru ${JSON.stringify(ru)}`);
  }
  const create = await run('owner', 'create', '--name', 'x', '--plan', 'free', '--ru', '0x10');
  t.same([create.code, create.err.split('\n')[0]], [2, 'chaingate: --ru must be a decimal integer from 0 to 9007199254740991']);
  t.equal((await run('owner', 'list')).out.split('\n').length, 3, 'no owner was made');

  const past = await run('owner', 'topup', String(id), '--ru', String(MAX_RU - 999));
  t.same(past, {
    code: 1,
    out: '',
    err: `chaingate: owner 1: a top-up of ${MAX_RU - 999} RU would take the balance (1000 RU) past the maximum 9007199254740991 RU\n`,
  });
  t.same(await run('owner', 'topup', String(id), '--ru', String(MAX_RU - 1000)), {
    code: 0,
    out: 'owner 1: balance 9007199254740991 RU\n',
    err: '',
  });
  t.equal((await run('owner', 'topup', String(id), '--ru', '1')).code, 1, 'at the maximum, even 1 RU more is refused');
  t.same(
    await run('owner', 'topup', String(id), '--ru', '0016'),
    {
      code: 1,
      out: '',
      err: 'chaingate: owner 1: a top-up of 16 RU would take the balance (9007199254740991 RU) past the maximum 9007199254740991 RU\n',
    },
    'leading zeros are still decimal',
  );
  const db = new Database(path, { readonly: true });
  t.teardown(() => db.close());
  t.same(db.prepare('SELECT ru FROM credits ORDER BY id').pluck().all(), [1000, MAX_RU - 1000], 'only the two accepted credits');
  t.same(invariantGaps(db), [{ id, gap: 0 }]);
});

t.test('every table escapes control characters: a stored name forges no row and sends no escape sequence', async (t) => {
  const { path, run } = cli(t);
  const { id } = await createOwner(run);
  // Rows as an older version stored them, before names were checked.
  const db = new Database(path);
  t.teardown(() => db.close());
  const forged = `x\nep_forged000000000  ${id}  mainnet  fake  abcdefgh…  2024-01-01 00:00:00Z`;
  db.prepare('UPDATE owners SET name = ?').run('acme\n2  evil  free  999999  no  0  2024-01-01 00:00:00Z');
  db.prepare(
    `INSERT INTO endpoints (id, owner_id, network, name, key_hash, key_prefix, created_at) VALUES (?, ?, 'mainnet', ?, ?, ?, 0)`,
  ).run('ep_aaaaaaaaaaaaaaaa', id, forged, Buffer.alloc(32, 1), 'ABCDEFGH');
  db.prepare(
    `INSERT INTO endpoints (id, owner_id, network, name, key_hash, key_prefix, created_at) VALUES (?, ?, 'mainnet', ?, ?, ?, 0)`,
  ).run('ep_bbbbbbbbbbbbbbbb', id, '\u001b[31mred\u001b]0;title\u0007\u202e\\n', Buffer.alloc(32, 2), 'BCDEFGHI');

  const endpoints = await run('endpoint', 'list');
  t.equal(endpoints.code, 0);
  const lines = endpoints.out.trimEnd().split('\n');
  t.equal(lines.length, 3, 'a header and one line per endpoint');
  // biome-ignore lint/complexity/noAdjacentSpacesInRegex: the forged name spells the table's two-space gaps
  t.match(lines[1], /^ep_aaaaaaaaaaaaaaaa\s+1\s+mainnet\s+x\\nep_forged000000000  1  mainnet/);
  t.match(lines[2], /^ep_bbbbbbbbbbbbbbbb\s+1\s+mainnet\s+\\x1b\[31mred\\x1b\]0;title\\x07\\u202e\\\\n\s+BCDEFGHI…/);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for control bytes in the output
  t.notMatch(endpoints.out, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/, 'no control byte reaches the terminal');

  const owners = await run('owner', 'list');
  const ownerLines = owners.out.trimEnd().split('\n');
  t.equal(ownerLines.length, 2);
  // biome-ignore lint/complexity/noAdjacentSpacesInRegex: the forged name spells the table's two-space gaps
  t.match(ownerLines[1], /^1\s+acme\\n2  evil  free  999999  no  0  2024-01-01 00:00:00Z\s+growth\s+1000\s+no\s+2\s/);
  const json = JSON.parse((await run('endpoint', 'list', '--json')).out) as Array<{ name: string }>;
  t.equal(json[0]!.name, forged, '--json keeps the exact value (JSON escapes it)');
});
