import t from 'tap';
import { exportJWK, exportSPKI, generateKeyPair } from 'jose';
import {
  applyFencePatch,
  DEFAULT_JWT_MAX_LIFETIME_S,
  FENCE_FIELDS,
  FENCE_LIMITS,
  type FenceProblem,
  fenceProblemsText,
  hasFences,
  NO_FENCES,
  storedFences,
} from '../../src/fences/settings.js';

const A = '0xAbCdEf0123456789aBcDeF0123456789abcdef01';

function problems(body: Record<string, unknown>, current = NO_FENCES, limits = FENCE_LIMITS): FenceProblem[] {
  const r = applyFencePatch(current, body, limits);
  if (r.ok) throw new Error(`accepted: ${JSON.stringify(body)}`);
  return r.problems;
}

function settings(body: Record<string, unknown>, current = NO_FENCES) {
  const r = applyFencePatch(current, body);
  if (!r.ok) throw new Error(fenceProblemsText(r.problems));
  return r.settings;
}

t.test('an endpoint without settings restricts nothing', async (t) => {
  t.equal(hasFences(NO_FENCES), false);
  t.equal(NO_FENCES.key_in_path, true);
  t.equal(NO_FENCES.jwt_max_lifetime_s, DEFAULT_JWT_MAX_LIFETIME_S);
  t.same([...FENCE_FIELDS].sort(), [
    'allow_no_origin',
    'allowed_contracts',
    'allowed_ips',
    'allowed_methods',
    'allowed_origins',
    'jwt_keys',
    'jwt_max_lifetime_s',
    'key_in_path',
  ]);
});

t.test('every field set at once, entries normalised and without duplicates', async (t) => {
  const s = settings({
    name: 'ignored: the caller reads the endpoint fields',
    allowed_origins: ['HTTPS://App.Example.com:443', 'https://app.example.com', '*.Dapp.xyz'],
    allow_no_origin: true,
    allowed_ips: ['192.0.2.7', '2001:db8::/32'],
    allowed_methods: ['eth_call', 'eth_get*', 'eth_call'],
    allowed_contracts: [A, A.toLowerCase()],
    key_in_path: false,
    jwt_max_lifetime_s: 900,
  });
  t.same(s, {
    allowed_origins: ['https://app.example.com', '*.dapp.xyz'],
    allow_no_origin: true,
    allowed_ips: ['192.0.2.7/32', '2001:db8::/32'],
    allowed_methods: ['eth_call', 'eth_get*'],
    allowed_contracts: [A.toLowerCase()],
    key_in_path: false,
    jwt_keys: null,
    jwt_max_lifetime_s: 900,
  });
  t.ok(Object.isFrozen(s) && Object.isFrozen(s.allowed_origins), 'frozen');
  t.equal(hasFences(s), true);
});

t.test('PATCH: a field left out stays, null clears it', async (t) => {
  const before = settings({ allowed_ips: ['10.0.0.0/8'], allowed_methods: ['eth_call'], key_in_path: false, jwt_max_lifetime_s: 60 });
  const after = settings({ allowed_methods: null, key_in_path: null, jwt_max_lifetime_s: null, allowed_contracts: [A] }, before);
  t.same(after.allowed_ips, ['10.0.0.0/8'], 'left out: kept');
  t.equal(after.allowed_methods, null, 'null: no restriction');
  t.equal(after.key_in_path, true, 'null: the default');
  t.equal(after.jwt_max_lifetime_s, DEFAULT_JWT_MAX_LIFETIME_S, 'null: the default');
  t.same(after.allowed_contracts, [A.toLowerCase()], 'set');
  t.same(settings({}, before), before, 'an empty body changes nothing');
});

t.test('shapes: each problem names its field, all of them at once', async (t) => {
  const found = problems({
    allowed_origins: 'https://a.io',
    allow_no_origin: 'yes',
    allowed_ips: [7],
    allowed_methods: [],
    allowed_contracts: [''],
    key_in_path: 1,
    jwt_max_lifetime_s: 0,
    jwt_keys: [{ id: 'k', alg: 'HS256', jwk: { kty: 'oct' } }],
  });
  const byField = Object.fromEntries(found.map((p) => [p.field, p.message]));
  t.match(byField.allowed_origins, /must be a list of origins/);
  t.match(byField.allow_no_origin, /true, false or null/);
  t.match(byField['allowed_ips[0]'], /must be an address or CIDR range as a string/);
  t.match(byField.allowed_methods, /an empty list would refuse everything; send null/);
  t.match(byField['allowed_contracts[0]'], /must not be empty/);
  t.match(byField.key_in_path, /true, false or null/);
  t.match(byField.jwt_max_lifetime_s, /whole number of seconds from 1 to 604800/);
  t.match(byField['jwt_keys[0].alg'], /must be one of ES256, RS256, EdDSA \(HS\* and none are refused/);
  t.notOk(
    found.some((p) => p.field === ''),
    'no problem without a field',
  );
});

t.test('list limits, with their defaults, and lower ones an operator sets', async (t) => {
  const many = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i));
  t.match(problems({ allowed_origins: many(FENCE_LIMITS.origins + 1, (i) => `https://a${i}.io`) }), [
    { field: 'allowed_origins', message: `at most ${FENCE_LIMITS.origins} entries` },
  ]);
  t.match(
    problems({ allowed_contracts: many(3, (i) => `0x${String(i).padStart(40, '0')}`) }, NO_FENCES, { ...FENCE_LIMITS, contracts: 2 }),
    [{ field: 'allowed_contracts', message: 'at most 2 entries' }],
  );
  t.match(problems({ allowed_methods: [`eth_${'x'.repeat(80)}`] }), [{ field: 'allowed_methods[0]', message: 'at most 64 characters' }]);
  t.match(problems({ allowed_origins: [`https://${'a'.repeat(300)}.io`] }), [
    { field: 'allowed_origins[0]', message: 'at most 300 characters' },
  ]);
  t.equal(
    settings({ allowed_contracts: many(FENCE_LIMITS.contracts, (i) => `0x${String(i).padStart(40, '0')}`) }).allowed_contracts?.length,
    1000,
  );
});

t.test("entries: each checked by its own rule, the 400's words naming the entry", async (t) => {
  const found = problems({
    allowed_origins: ['https://ok.io', 'ftp://x.io'],
    allowed_ips: ['10.0.0.1/8'],
    allowed_methods: ['eth_getLogs', 'eth_getlogs', 'debug*x'],
    allowed_contracts: ['0x1234'],
  });
  t.same(
    found.map((p) => p.field),
    ['allowed_origins[1]', 'allowed_ips[0]', 'allowed_methods[1]', 'allowed_methods[2]', 'allowed_contracts[0]'],
  );
  t.match(fenceProblemsText(found), /allowed_origins\[1\]: 'ftp:\/\/x\.io' is not an origin/);
  t.match(
    fenceProblemsText(found),
    /allowed_methods\[1\]: 'eth_getlogs' is not a method the gateway serves \(did you mean eth_getLogs\?\)/,
  );
  t.match(fenceProblemsText(found), /did you mean 10\.0\.0\.0\/8\?/);
});

t.test('jwt_keys: JWK or PEM, unique ids, public keys of their algorithm', async (t) => {
  const es = await generateKeyPair('ES256', { extractable: true });
  const ed = await generateKeyPair('EdDSA', { extractable: true });
  const jwk = await exportJWK(es.publicKey);
  const pem = await exportSPKI(ed.publicKey);
  const s = settings({
    jwt_keys: [
      { id: 'backend-2026', alg: 'ES256', jwk },
      { id: 'ed', alg: 'EdDSA', pem },
    ],
  });
  t.equal(s.jwt_keys?.length, 2);
  const found = problems({
    jwt_keys: [
      { id: 'a', alg: 'ES256', jwk },
      { id: 'a', alg: 'EdDSA', pem },
      { id: 'b', alg: 'EdDSA', jwk },
      { id: 'c', alg: 'ES256', jwk: await exportJWK(es.privateKey) },
    ],
  });
  t.same(
    found.map((p) => p.field),
    ['jwt_keys[1]', 'jwt_keys[2]', 'jwt_keys[3]'],
  );
  t.match(found[0]!.message, /key id 'a' is given twice/);
  t.match(found[1]!.message, /EdDSA needs an Ed25519/);
  t.match(found[2]!.message, /public key only/);
  t.same(problems({ jwt_keys: [{ id: 'bad id!', alg: 'ES256', jwk }] }), [
    { field: 'jwt_keys[0].id', message: 'letters, digits and . _ : - only' },
  ]);
  t.same(problems({ jwt_keys: [{ id: 'x', alg: 'ES256', jwk, pem }] }), [
    { field: 'jwt_keys[0]', message: "key 'x': give the public key as jwk or as pem, one of them" },
  ]);
  t.same(problems({ jwt_keys: [{ id: 'x', alg: 'ES256' }] }), [
    { field: 'jwt_keys[0]', message: "key 'x': give the public key as jwk or as pem, one of them" },
  ]);
  t.same(problems({ jwt_keys: [{ id: 'x', alg: 'ES256', jwk, extra: 1 }] }), [
    { field: 'jwt_keys[0].extra', message: 'a key is {id, alg, jwk} or {id, alg, pem}' },
  ]);
});

t.test('stored settings are read back, without the limits; invalid text throws', async (t) => {
  const s = settings({ allowed_origins: ['https://a.io'], allowed_contracts: [A] });
  t.same(storedFences(JSON.stringify(s)), s);
  t.equal(storedFences(null), NO_FENCES);
  const many = Array.from({ length: FENCE_LIMITS.contracts + 5 }, (_, i) => `0x${String(i).padStart(40, '0')}`);
  t.equal(
    storedFences(JSON.stringify({ allowed_contracts: many })).allowed_contracts?.length,
    many.length,
    'a limit lowered later does not break it',
  );
  t.throws(() => storedFences(JSON.stringify({ allowed_ips: ['nope'] })), /stored endpoint restrictions are not valid: allowed_ips\[0\]/);
});
