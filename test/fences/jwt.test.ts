import t from 'tap';
import { createHmac, generateKeyPairSync } from 'node:crypto';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, UnsecuredJWT, type CryptoKey } from 'jose';
import { CLOCK_SKEW_S, importJwtKey, type JwtAlgorithm, type JwtKeySetting, MAX_TOKEN_CHARS, TokenVerifier } from '../../src/fences/jwt.js';

const NOW = 1_800_000_000; // s
let clock = NOW * 1000;
const now = () => clock;

interface Pair {
  alg: JwtAlgorithm;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
}

async function pair(alg: JwtAlgorithm): Promise<Pair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { alg, privateKey, publicKey };
}

async function token(p: Pair, claims: Record<string, unknown>, header: Record<string, unknown> = {}): Promise<string> {
  const jwt = new SignJWT(claims).setProtectedHeader({ alg: p.alg, ...header });
  return jwt.sign(p.privateKey);
}

const times = (lifetime = 600) => ({ iat: NOW - 10, exp: NOW - 10 + lifetime, sub: 'user-1' });

async function check(v: TokenVerifier, jwt: string | undefined) {
  return await v.check(jwt);
}

t.beforeEach(() => {
  clock = NOW * 1000;
});

t.test('a good token for each algorithm, by kid, with JWK and PEM keys', async (t) => {
  for (const alg of ['ES256', 'RS256', 'EdDSA'] as const) {
    const p = await pair(alg);
    const jwk = await exportJWK(p.publicKey);
    const pem = await exportSPKI(p.publicKey);
    for (const setting of [
      { id: 'k1', alg, jwk },
      { id: 'k1', alg, pem },
    ] as JwtKeySetting[]) {
      const v = new TokenVerifier([setting], { maxLifetimeS: 3600, now });
      const form = setting.jwk !== undefined ? 'JWK' : 'PEM';
      t.same(await check(v, await token(p, times(), { kid: 'k1' })), { ok: true, exp: NOW + 590 }, `${alg} by kid (${form})`);
      t.same(await check(v, await token(p, times())), { ok: true, exp: NOW + 590 }, `${alg} without kid (${form})`);
    }
  }
});

t.test('refusals', async (t) => {
  const es = await pair('ES256');
  const other = await pair('ES256');
  const rs = await pair('RS256');
  const keys: JwtKeySetting[] = [
    { id: 'es', alg: 'ES256', jwk: await exportJWK(es.publicKey) },
    { id: 'rs', alg: 'RS256', jwk: await exportJWK(rs.publicKey) },
  ];
  const v = new TokenVerifier(keys, { maxLifetimeS: 3600, now });
  const refused = async (jwt: string | undefined, why: RegExp, name: string) => {
    const r = await check(v, jwt);
    t.equal(r.ok, false, name);
    if (!r.ok) t.match(r.message, why, name);
  };
  await refused(undefined, /a signed token is required/, 'no token');
  await refused('', /a signed token is required/, 'empty');
  await refused('not.a.jwt', /not a JWT/, 'garbage');
  await refused(await token(es, { iat: NOW - 700, exp: NOW - 100 }, { kid: 'es' }), /token expired/, 'expired');
  await refused(await token(es, { iat: NOW, exp: NOW + 600, nbf: NOW + 120 }, { kid: 'es' }), /not yet valid/, 'not yet valid');
  await refused(await token(other, times(), { kid: 'es' }), /signature does not verify/, 'signed by another key');
  await refused(await token(other, times()), /signature does not verify/, 'another key, no kid');
  await refused(await token(es, times(), { kid: 'nope' }), /key id 'nope' is not registered/, 'unknown kid');
  await refused(
    await token(rs, times(), { kid: 'es' }),
    /algorithm RS256 does not match its key's \(ES256\)/,
    'alg confusion: RS256 against the EC key',
  );
  await refused(new UnsecuredJWT(times()).encode(), /algorithm "none" is not accepted/, 'alg none');
  // HS256 with the public key's text as the HMAC secret: the classic confusion, refused before any cryptography.
  const pem = await exportSPKI(rs.publicKey);
  await refused(hs256(times(), pem, 'rs'), /algorithm "HS256" is not accepted/, 'HS256 signed with the public key');
  await refused(await token(es, { iat: NOW, sub: 'x' }, { kid: 'es' }), /no exp/, 'missing exp');
  await refused(await token(es, { iat: NOW, exp: 'soon' }, { kid: 'es' }), /exp is not a number/, 'exp not a number');
  await refused(await token(es, times(7200), { kid: 'es' }), /lifetime over this endpoint's 3600 s/, 'too long a lifetime');
  await refused(await token(es, { exp: NOW + 7200 }, { kid: 'es' }), /lifetime over/, 'too long, counted from now without iat');
  await refused(
    await token(es, { iat: NOW + 5000, exp: NOW + 5600 }, { kid: 'es' }),
    /lifetime over/,
    'an iat in the future counts from now',
  );
  await refused('x'.repeat(MAX_TOKEN_CHARS + 1), /longer than/, 'too long a token');
  const noEs = new TokenVerifier([keys[1]!], { maxLifetimeS: 3600, now });
  const r = await check(noEs, await token(es, times()));
  t.match(r.ok ? '' : r.message, /no registered key for ES256/, 'no key of the algorithm');
});

function hs256(claims: Record<string, unknown>, secret: string, kid: string): string {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${part({ alg: 'HS256', kid })}.${part(claims)}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}

t.test('clock skew: exp and nbf within CLOCK_SKEW_S pass', async (t) => {
  const p = await pair('EdDSA');
  const v = new TokenVerifier([{ id: 'ed', alg: 'EdDSA', jwk: await exportJWK(p.publicKey) }], { maxLifetimeS: 3600, now });
  t.equal((await check(v, await token(p, { iat: NOW - 600, exp: NOW - CLOCK_SKEW_S + 1 }))).ok, true, 'expired by less than the skew');
  t.equal((await check(v, await token(p, { iat: NOW - 600, exp: NOW - CLOCK_SKEW_S - 1 }))).ok, false, 'expired by more');
  t.equal((await check(v, await token(p, { iat: NOW, exp: NOW + 60, nbf: NOW + CLOCK_SKEW_S - 1 }))).ok, true, 'nbf within the skew');
});

t.test('a verified token is kept: later checks are synchronous, and its times are checked on each', async (t) => {
  const p = await pair('ES256');
  const v = new TokenVerifier([{ id: 'k', alg: 'ES256', jwk: await exportJWK(p.publicKey) }], { maxLifetimeS: 3600, now });
  const jwt = await token(p, { iat: NOW, exp: NOW + 60, nbf: NOW + 40 });
  const first = v.check(jwt);
  t.ok(first instanceof Promise, 'the first check verifies the signature');
  const r1 = await first;
  t.equal(r1.ok, false, 'not yet valid at first');
  clock += 45_000;
  const second = v.check(jwt);
  t.notOk(second instanceof Promise, 'then answered from the cache');
  t.same(second, { ok: true, exp: NOW + 60 }, 'valid once nbf has passed');
  clock += 60_000;
  t.same(v.check(jwt), { ok: false, message: 'token expired' }, 'and expired after exp, from the cache too');
  const bad = await token(await pair('ES256'), times());
  await v.check(bad);
  t.notOk(v.check(bad) instanceof Promise, 'a refused signature is kept too');
});

t.test('keys: public only, of the declared algorithm', async (t) => {
  const es = await pair('ES256');
  const esJwk = await exportJWK(es.publicKey);
  t.notOk(typeof importJwtKey({ id: 'a', alg: 'ES256', jwk: esJwk }) === 'string', 'an EC P-256 JWK for ES256');
  t.match(importJwtKey({ id: 'a', alg: 'RS256', jwk: esJwk }), /key 'a': RS256 needs an RSA key/);
  t.match(importJwtKey({ id: 'a', alg: 'EdDSA', jwk: esJwk }), /EdDSA needs an Ed25519 or Ed448 key/);
  t.match(
    importJwtKey({ id: 'a', alg: 'ES256', jwk: await exportJWK(es.privateKey) }),
    /public key only \(this JWK holds secret members\)/,
  );
  t.match(importJwtKey({ id: 'a', alg: 'ES256', jwk: { kty: 'oct', k: 'c2VjcmV0' } }), /public key only/);
  t.match(importJwtKey({ id: 'a', alg: 'ES256', jwk: { kty: 'EC', crv: 'P-256', x: 'AA', y: 'AA' } }), /not a readable public key/);
  const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });
  t.match(importJwtKey({ id: 'a', alg: 'ES256', pem: p384.publicKey.export({ type: 'spki', format: 'pem' }) as string }), /P-256/);
  const rsa1024 = generateKeyPairSync('rsa', { modulusLength: 1024 });
  t.match(
    importJwtKey({ id: 'r', alg: 'RS256', pem: rsa1024.publicKey.export({ type: 'spki', format: 'pem' }) as string }),
    /2048 bits or more/,
  );
  const privatePem = rsa1024.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  t.match(importJwtKey({ id: 'r', alg: 'RS256', pem: privatePem }), /this PEM is a private key/);
  t.match(
    importJwtKey({ id: 'r', alg: 'RS256', pem: '-----BEGIN CERTIFICATE-----\nAA\n-----END CERTIFICATE-----' }),
    /must be a public key/,
  );
  t.match(
    importJwtKey({ id: 'r', alg: 'RS256', pem: '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----' }),
    /not a readable public key/,
  );
});

t.test('requests bringing the same new token at once share one verification', async (t) => {
  const p = await pair('ES256');
  const v = new TokenVerifier([{ id: 'k', alg: 'ES256', jwk: await exportJWK(p.publicKey) }], { maxLifetimeS: 3600, now });
  const jwt = await token(p, times());
  const a = v.check(jwt);
  const b = v.check(jwt);
  t.ok(a instanceof Promise && b instanceof Promise);
  t.same(await Promise.all([a, b]), [
    { ok: true, exp: NOW + 590 },
    { ok: true, exp: NOW + 590 },
  ]);
  t.notOk(v.check(jwt) instanceof Promise, 'kept once verified');
});
