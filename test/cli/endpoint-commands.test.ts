/**
 * `chaingate endpoint set` and `endpoint rotate` on a real SQLite file: flags become the API's settings
 * (lists comma-separated or repeated, `none` clears), problems name the flag, and a rotation prints the
 * new key once with the old key's end.
 */
import t, { type Test } from 'tap';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createSqliteAccounts } from '../../src/accounts/sqlite-accounts.js';
import type { Config } from '../../src/config/schema.js';
import { validateConfig } from '../../src/config/schema.js';
import { openStore } from '../../src/store/open.js';
import { type CliRun, runTenancy } from '../support/tenancy-cli.js';
import { tempDbPath, tempStore } from '../store/temp-store.js';

function configFor(path: string): Config {
  const r = validateConfig({ storage: { path }, chains: { mainnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } } });
  if (!r.ok) throw new Error(r.errors.join('; '));
  return r.config;
}

/** A database as serve makes it, an owner with one endpoint, and a runner of commands on it. */
async function setUp(t: Test) {
  const path = tempDbPath(t);
  openStore(path).close();
  const config = configFor(path);
  const accounts = createSqliteAccounts(tempStore(t, path));
  const owner = await accounts.createOwner('acme', 'free', 100);
  const made = await accounts.createEndpoint(owner.id, 'mainnet', 'web', 10);
  if (made.kind === 'refused') throw new Error(made.error);
  const run = (...argv: string[]): Promise<CliRun> => runTenancy(config, ...argv);
  const settings = async () => (await accounts.listEndpoints(owner.id))[0]!.fences;
  return { path, accounts, owner, endpoint: made.endpoint, apiKey: made.apiKey, run, settings };
}

t.test('endpoint set: flags to settings, none clears, a flag left out stays', async (t) => {
  const { endpoint, run, settings, path } = await setUp(t);
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const pemFile = join(dirname(path), 'k1.pem');
  writeFileSync(pemFile, ec.publicKey.export({ type: 'spki', format: 'pem' }));
  const ed = generateKeyPairSync('ed25519');
  const jwkFile = join(dirname(path), 'k2.jwk');
  writeFileSync(jwkFile, JSON.stringify(ed.publicKey.export({ format: 'jwk' })));

  const r = await run(
    'endpoint',
    'set',
    endpoint.id,
    '--allowed-origins',
    'https://App.example.com:443, *.example.org',
    '--allowed-origins',
    'http://localhost:3000',
    '--allowed-ips=192.0.2.0/24,2001:db8::/32',
    '--allowed-methods',
    'eth_call,eth_get*',
    '--allow-no-origin',
    'true',
    '--key-in-path',
    'false',
    '--jwt-key',
    `k1:ES256:${pemFile},k2:EdDSA:${jwkFile}`,
    '--jwt-max-lifetime',
    '15m',
  );
  t.equal(r.err, '');
  t.equal(r.code, 0);
  t.match(r.out, new RegExp(`^endpoint ${endpoint.id}: settings saved\\nSETTING\\s+VALUE\\n`));
  t.match(r.out, /allowed_origins\s+https:\/\/app\.example\.com, \*\.example\.org, http:\/\/localhost:3000\n/);
  t.match(r.out, /jwt_keys\s+k1 \(ES256\), k2 \(EdDSA\)\n/);
  t.match(await settings(), {
    allowed_origins: ['https://app.example.com', '*.example.org', 'http://localhost:3000'],
    allow_no_origin: true,
    allowed_ips: ['192.0.2.0/24', '2001:db8::/32'],
    allowed_methods: ['eth_call', 'eth_get*'],
    allowed_contracts: null,
    key_in_path: false,
    jwt_keys: [
      { id: 'k1', alg: 'ES256', pem: /^-----BEGIN PUBLIC KEY-----/ },
      { id: 'k2', alg: 'EdDSA', jwk: { kty: 'OKP', crv: 'Ed25519' } },
    ],
    jwt_max_lifetime_s: 900,
  });

  const cleared = await run(
    'endpoint',
    'set',
    endpoint.id,
    '--allowed-origins',
    'none',
    '--jwt-key',
    'none',
    '--key-in-path',
    'none',
    '--json',
  );
  t.equal(cleared.code, 0, cleared.err);
  const json = JSON.parse(cleared.out) as Record<string, unknown>;
  t.match(json, {
    id: endpoint.id,
    allowed_origins: null,
    jwt_keys: null,
    key_in_path: true,
    allowed_ips: ['192.0.2.0/24', '2001:db8::/32'],
  });
  t.match(await settings(), {
    allowed_origins: null,
    key_in_path: true,
    allowed_methods: ['eth_call', 'eth_get*'],
    jwt_max_lifetime_s: 900,
  });
});

t.test('endpoint set: every problem named by its flag, exit 2; an unknown endpoint exit 1', async (t) => {
  const { endpoint, run, settings, path } = await setUp(t);
  const before = await settings();
  const bad = await run('endpoint', 'set', endpoint.id, '--allowed-ips', '10.0.0.0/8,300.1.2.3', '--allowed-contracts', '0x12');
  t.equal(bad.code, 2);
  t.match(bad.err, /^chaingate: --allowed-ips \(entry 2\): .*300\.1\.2\.3/);
  t.match(bad.err, /\n--allowed-contracts \(entry 1\): /);
  // The shapes are checked before the entries (fences/settings.ts): a lifetime out of range is named alone.
  const long = await run('endpoint', 'set', endpoint.id, '--jwt-max-lifetime', '30d', '--allow-no-origin', 'true');
  t.match(long.err, /^chaingate: --jwt-max-lifetime: must be a whole number of seconds from 1 to 604800\n/);
  t.same(await settings(), before, 'nothing written');

  t.match((await run('endpoint', 'set', endpoint.id, '--key-in-path', 'yes')).err, "--key-in-path must be true, false or none, got 'yes'");
  t.match(
    (await run('endpoint', 'set', endpoint.id, '--jwt-max-lifetime', '1 hour')).err,
    '--jwt-max-lifetime must be whole seconds or a duration',
  );
  t.match((await run('endpoint', 'set', endpoint.id, '--jwt-key', 'k1-no-alg')).err, '--jwt-key takes id:alg:FILE');
  t.match(
    (await run('endpoint', 'set', endpoint.id, '--jwt-key', `k1:ES256:${join(dirname(path), 'missing.pem')}`)).err,
    /--jwt-key k1: cannot read .*missing\.pem/,
  );
  const none = await run('endpoint', 'set', endpoint.id);
  t.equal(none.code, 2);
  t.match(none.err, 'endpoint set needs at least one of --allowed-origins');
  t.match((await run('endpoint', 'set')).err, 'missing endpoint ID');
  t.match((await run('endpoint', 'set', endpoint.id, '--grace', '1h')).err, 'endpoint set takes no --grace');
  t.same(await run('endpoint', 'set', 'ep_nope', '--allowed-ips', 'none'), { code: 1, out: '', err: 'chaingate: no endpoint ep_nope\n' });
});

t.test('endpoint rotate: the new key once, the old one until its end; --grace 0 ends it at once', async (t) => {
  const { accounts, endpoint, apiKey, run } = await setUp(t);
  const before = Math.floor(Date.now() / 1000);
  const r = await run('endpoint', 'rotate', endpoint.id);
  t.equal(r.code, 0, r.err);
  const m = /^endpoint (\S+): new API key \(shown once, keep it secret\): (\S+)\nthe previous key \((\S+)…\) works until (\S+ \S+)\n$/.exec(
    r.out,
  );
  t.ok(m, r.out);
  const [, id, second, prefix, until] = m!;
  t.equal(id, endpoint.id);
  t.equal(prefix, apiKey.slice(0, 8));
  const ends = Date.parse(until!.replace(' ', 'T')) / 1000;
  t.ok(ends >= before + 86_400 && ends <= before + 86_400 + 5, 'the default grace is 24 hours');
  t.ok(await accounts.endpointByKey(apiKey), 'the old key works during its grace');
  t.ok(await accounts.endpointByKey(second!), 'the new key works');

  const j = await run('endpoint', 'rotate', endpoint.id, '--grace', '2h', '--json');
  t.equal(j.code, 0, j.err);
  const rotated = JSON.parse(j.out) as { id: string; api_key: string; previous_key_expires_at: string };
  t.equal(rotated.id, endpoint.id);
  t.ok(Math.abs(Date.parse(rotated.previous_key_expires_at) / 1000 - (before + 7200)) <= 5);

  const now = await run('endpoint', 'rotate', endpoint.id, '--grace', '0');
  t.equal(now.code, 0, now.err);
  t.match(now.out, /\nthe previous key is refused from now on\n$/);
  t.equal(await accounts.endpointByKey(rotated.api_key), null, 'grace 0: refused at once');

  t.match((await run('endpoint', 'rotate', endpoint.id, '--grace', '31d')).err, '--grace must be at most 30d (2592000 seconds)');
  t.match((await run('endpoint', 'rotate', endpoint.id, '--grace', 'soon')).err, '--grace must be whole seconds or a duration');
  t.same(await run('endpoint', 'rotate', 'ep_nope'), { code: 1, out: '', err: 'chaingate: no endpoint ep_nope\n' });
});
