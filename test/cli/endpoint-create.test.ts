/**
 * `chaingate endpoint create` and `endpoint delete` on a real SQLite file: an endpoint made for an owner
 * with the management API's checks (a configured chain, a live owner, its plan's max_endpoints), its key
 * shown once and working at the daemon's lookup; a deleted endpoint's key refused. Listings' --json times
 * are ISO 8601, as the API's.
 */
import t, { type Test } from 'tap';
import Database from 'better-sqlite3';
import type { Config } from '../../src/config/schema.js';
import { validateConfig } from '../../src/config/schema.js';
import { openStore } from '../../src/store/open.js';
import { createDirectory } from '../../src/tenancy/directory.js';
import { type CliRun, runTenancy } from '../support/tenancy-cli.js';
import { tempDbPath, tempStore } from '../store/temp-store.js';

const chain = (id: number) => ({ chain_id: id, upstreams: [{ url: 'http://127.0.0.1:1' }] });
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

function setUp(t: Test, chains: Record<string, unknown> = { mainnet: chain(1) }) {
  const path = tempDbPath(t);
  openStore(path).close();
  const server = { default_chain: Object.keys(chains)[0] };
  const r = validateConfig({ server, storage: { path }, chains, plans: { tiny: { rps: 10, max_endpoints: 2 }, free: { rps: 10 } } });
  if (!r.ok) throw new Error(r.errors.join('; '));
  const config: Config = r.config;
  const run = (...argv: string[]): Promise<CliRun> => runTenancy(config, ...argv);
  return { path, run };
}

async function owner(run: (...argv: string[]) => Promise<CliRun>, plan = 'tiny'): Promise<number> {
  const r = await run('owner', 'create', '--name', 'acme', '--plan', plan, '--ru', '10', '--json');
  return (JSON.parse(r.out) as { id: number }).id;
}

t.test('endpoint create: the key once, working; the only chain by default; JSON as the API answers', async (t) => {
  const { path, run } = setUp(t);
  const id = await owner(run);
  const made = await run('endpoint', 'create', '--owner', String(id), '--name', ' web app ');
  t.equal(made.code, 0, made.err);
  const m = /^endpoint (ep_\w+) created for owner 1 on mainnet\nAPI key \(shown once, keep it secret\): (\w{32})\n$/.exec(made.out);
  t.ok(m, made.out);
  const dir = createDirectory(tempStore(t, path));
  const grant = dir.endpointByKey(m![2]!);
  t.match(grant, { endpointId: m![1], network: 'mainnet' }, "the daemon's lookup knows the key");

  const json = await run('endpoint', 'create', '--owner', String(id), '--name', 'api', '--chain', 'mainnet', '--json');
  const body = JSON.parse(json.out) as Record<string, unknown>;
  t.match(body, { id: /^ep_/, owner_id: id, name: 'api', network: 'mainnet', api_key: /^\w{32}$/, created_at: ISO, allowed_origins: null });
  t.equal((body.api_key as string).slice(0, 8), body.key_prefix);

  const listed = JSON.parse((await run('endpoint', 'list', '--json')).out) as Array<{ name: string; created_at: string }>;
  t.same(
    // Made in the same second, the two are listed in their ids' (random) order.
    listed.map((e) => e.name).sort(),
    ['api', 'web app'],
    'stored with the name trimmed',
  );
  for (const e of listed) t.match(e.created_at, ISO, 'endpoint list --json: ISO 8601');
  const owners = JSON.parse((await run('owner', 'list', '--json')).out) as Array<{ created_at: string }>;
  t.match(owners[0]!.created_at, ISO, 'owner list --json: ISO 8601');
  const keys = JSON.parse((await run('owner', 'key', 'list', String(id), '--json')).out) as unknown[];
  t.match(keys, [{ key_prefix: /^\w{8}$/, created_at: ISO, revoked_at: null }], 'owner key list --json');

  const db = new Database(path, { readonly: true });
  t.teardown(() => db.close());
  t.notOk(
    (db.prepare('SELECT * FROM endpoints').all() as Array<Record<string, unknown>>).some((row) => JSON.stringify(row).includes(m![2]!)),
    'the key is stored hashed only',
  );
});

t.test('endpoint create refuses as the API does: the plan limit, a suspended or unknown owner (exit 1)', async (t) => {
  const { run } = setUp(t);
  const id = await owner(run);
  for (const name of ['a', 'b']) t.equal((await run('endpoint', 'create', '--owner', String(id), '--name', name)).code, 0);
  t.same(await run('endpoint', 'create', '--owner', String(id), '--name', 'c'), {
    code: 1,
    out: '',
    err: "chaingate: Endpoint limit reached: plan 'tiny' allows 2 endpoints (owner 1; plans.tiny.max_endpoints)\n",
  });
  const other = await owner(run, 'free');
  t.equal((await run('owner', 'suspend', String(other))).code, 0);
  t.same(await run('endpoint', 'create', '--owner', String(other), '--name', 'x'), {
    code: 1,
    out: '',
    err: `chaingate: owner ${other} is suspended: its keys are refused (owner resume ${other} first)\n`,
  });
  t.same(await run('endpoint', 'create', '--owner', '99', '--name', 'x'), { code: 1, out: '', err: 'chaingate: no owner 99\n' });
  t.equal((await run('endpoint', 'list')).out.trimEnd().split('\n').length, 3, 'a header and the two endpoints: nothing else made');
});

t.test('endpoint create: argument errors exit 2 with one line and a pointer to its help', async (t) => {
  const { run } = setUp(t, { mainnet: chain(1), sepolia: chain(11155111) });
  const id = String(await owner(run));
  const usage = async (...argv: string[]): Promise<string> => {
    const r = await run('endpoint', 'create', ...argv);
    t.equal(r.code, 2, argv.join(' '));
    t.equal(r.out, '');
    const [line, pointer, rest] = r.err.split('\n');
    t.equal(pointer, "Run 'chaingate endpoint create --help' for usage.");
    t.equal(rest, '');
    return line!;
  };
  t.equal(await usage('--owner', id, '--name', 'x'), 'chaingate: missing --chain SLUG: the config has several chains (mainnet, sepolia)');
  t.equal(
    await usage('--owner', id, '--name', 'x', '--chain', 'goerli'),
    "chaingate: --chain: unknown chain 'goerli' (chains: mainnet, sepolia)",
  );
  t.equal(await usage('--owner', 'one', '--name', 'x', '--chain', 'mainnet'), "chaingate: --owner must be a positive integer, got 'one'");
  t.equal(await usage('--owner', id, '--chain', 'mainnet'), 'chaingate: missing --name NAME');
  t.equal(await usage('--owner', id, '--name', '  ', '--chain', 'mainnet'), 'chaingate: missing --name NAME');
  t.equal(
    await usage('--owner', id, '--name', 'a\u001bb', '--chain', 'mainnet'),
    'chaingate: --name must not contain control, format or line-separator characters (found U+001B)',
  );
  t.equal(await usage('--name', 'x'), 'chaingate: missing --owner ID');
  t.equal(await usage('--owner', id, '--name', 'x', '--grace', '1h'), 'chaingate: endpoint create takes no --grace');
  const ok = await run('endpoint', 'create', '--owner', id, '--name', 'x', '--chain', 'sepolia');
  t.equal(ok.code, 0, ok.err);
  t.match(ok.out, / on sepolia\n/);
});

t.test('endpoint delete: the key refused once the daemon refreshes; twice is exit 1', async (t) => {
  const { path, run } = setUp(t);
  const id = await owner(run);
  const made = JSON.parse((await run('endpoint', 'create', '--owner', String(id), '--name', 'web', '--json')).out) as {
    id: string;
    api_key: string;
  };
  const dir = createDirectory(tempStore(t, path));
  t.ok(dir.endpointByKey(made.api_key));
  dir.refreshIfChanged();
  t.same(await run('endpoint', 'delete', made.id), {
    code: 0,
    out: `endpoint ${made.id} deleted: its key is refused from now on\n`,
    err: '',
  });
  t.ok(dir.refreshIfChanged(), 'the daemon sees a change');
  t.same(dir.takeRevokedEndpointIds(), [made.id], 'and closes its connections');
  t.equal(dir.endpointByKey(made.api_key), null, 'its key is refused');
  t.same(await run('endpoint', 'delete', made.id), { code: 1, out: '', err: `chaingate: no endpoint ${made.id}\n` });
  const missing = await run('endpoint', 'delete');
  t.equal(missing.code, 2);
  t.match(missing.err, /^chaingate: missing endpoint ID \(see endpoint list\)\nRun 'chaingate endpoint delete --help' for usage\.\n$/);
});
