import t from 'tap';
import { Wallet } from 'ethers';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { ERRORS } from '../../src/errors.js';
import {
  compileFences,
  type EndpointFences,
  FENCE_ERRORS,
  type FenceRefusal,
  refuseCall,
  refuseRequest,
  refuseToken,
} from '../../src/fences/fences.js';
import { applyFencePatch, type FenceSettings, NO_FENCES } from '../../src/fences/settings.js';

const A = '0x1111111111111111111111111111111111111111';
const OTHER = '0x3333333333333333333333333333333333333333';

function fenced(body: Record<string, unknown>, options = { balance: false }): EndpointFences {
  const r = applyFencePatch(NO_FENCES, body);
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return compileFences(r.settings, options);
}

const request = (origin: string | undefined, ip: string | Uint8Array = '203.0.113.5', keyPlace: 'path' | 'header' = 'path') => ({
  origin,
  ip,
  keyPlace,
});

t.test('an endpoint without restrictions refuses nothing', async (t) => {
  const f = compileFences(NO_FENCES);
  t.equal(f.checksCalls, false);
  t.equal(refuseRequest(f, request(undefined)), undefined);
  t.equal(refuseRequest(f, request('https://anything.io')), undefined);
  t.equal(refuseToken(f, undefined), undefined);
  t.equal(refuseCall(f, 'eth_call', [{ to: OTHER }]), undefined);
});

t.test('origins: a request without Origin is refused unless allow_no_origin', async (t) => {
  const f = fenced({ allowed_origins: ['https://app.example.com', '*.secret-partner.io'] });
  t.equal(refuseRequest(f, request('https://app.example.com')), undefined);
  t.same(refuseRequest(f, request('https://evil.io')), { kind: 'origin', message: 'Origin "https://evil.io" is not allowed for this key' });
  t.same(refuseRequest(f, request(undefined)), { kind: 'origin', message: 'A request without Origin is not allowed for this key' });
  t.same(refuseRequest(f, request('')), { kind: 'origin', message: 'A request without Origin is not allowed for this key' });
  t.match(refuseRequest(f, request('null')), { kind: 'origin' }, 'Origin: null is an origin, and never allowed');
  const servers = fenced({ allowed_origins: ['https://app.example.com'], allow_no_origin: true });
  t.equal(refuseRequest(servers, request(undefined)), undefined, 'a server without Origin, when allowed');
  t.match(refuseRequest(servers, request('https://evil.io')), { kind: 'origin' }, 'a browser elsewhere still refused');
  const long = `https://${'a'.repeat(500)}.io`;
  t.ok((refuseRequest(f, request(long))?.message.length ?? 0) < 300, 'a long Origin is cut in the message');
});

t.test('IPs: text or socket bytes', async (t) => {
  const f = fenced({ allowed_ips: ['192.0.2.0/24', '2001:db8::/32'] });
  t.equal(refuseRequest(f, request(undefined, '192.0.2.9')), undefined);
  t.same(refuseRequest(f, request(undefined, '198.51.100.1')), {
    kind: 'ip',
    message: 'Client address 198.51.100.1 is not allowed for this key',
  });
  t.equal(refuseRequest(f, request(undefined, Uint8Array.from([192, 0, 2, 1]))), undefined);
  t.same(refuseRequest(f, request(undefined, Uint8Array.from([10, 0, 0, 1]))), {
    kind: 'ip',
    message: 'Client address 10.0.0.1 is not allowed for this key',
  });
  const v6 = Uint8Array.from([0x20, 0x01, 0x0d, 0xb9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
  t.same(refuseRequest(f, request(undefined, v6)), {
    kind: 'ip',
    message: 'Client address 2001:db9:0:0:0:0:0:1 is not allowed for this key',
  });
});

t.test('key_in_path: false refuses the key in the URL, as a missing key', async (t) => {
  const f = fenced({ key_in_path: false });
  t.equal(refuseRequest(f, request(undefined, '192.0.2.1', 'header')), undefined);
  const r = refuseRequest(f, request(undefined, '192.0.2.1', 'path'));
  t.match(r, { kind: 'key_in_path', message: /only in a header \(X-API-Key or Authorization: Bearer\)/ });
  t.equal(FENCE_ERRORS.key_in_path, 'unauthorized');
});

t.test('the order of request checks: key place, address, origin', async (t) => {
  const f = fenced({ key_in_path: false, allowed_ips: ['192.0.2.0/24'], allowed_origins: ['https://a.io'] });
  t.equal(refuseRequest(f, request('https://b.io', '10.0.0.1', 'path'))?.kind, 'key_in_path');
  t.equal(refuseRequest(f, request('https://b.io', '10.0.0.1', 'header'))?.kind, 'ip');
  t.equal(refuseRequest(f, request('https://b.io', '192.0.2.1', 'header'))?.kind, 'origin');
  t.equal(refuseRequest(f, request('https://a.io', '192.0.2.1', 'header')), undefined);
});

t.test('methods: the pattern syntax of plans', async (t) => {
  const f = fenced({ allowed_methods: ['eth_call', 'eth_get*'] });
  t.equal(f.checksCalls, true);
  t.equal(refuseCall(f, 'eth_call', [{ to: A }]), undefined);
  t.equal(refuseCall(f, 'eth_getBalance', [A, 'latest']), undefined);
  t.same(refuseCall(f, 'eth_sendRawTransaction', ['0x00']), {
    kind: 'method',
    message: 'Method eth_sendRawTransaction is not allowed for this key',
  });
});

t.test('contracts: through refuseCall, after the method list', async (t) => {
  const f = fenced({ allowed_contracts: [A], allowed_methods: ['eth_call', 'eth_getLogs', 'eth_sendRawTransaction', 'eth_getBalance'] });
  t.equal(refuseCall(f, 'eth_call', [{ to: A }]), undefined);
  t.same(refuseCall(f, 'eth_call', [{ to: OTHER }]), {
    kind: 'contract',
    message: `eth_call: contract ${OTHER} is not allowed for this key`,
  });
  t.match(refuseCall(f, 'eth_getLogs', [{}]), { kind: 'contract', message: /names no contract address/ });
  t.equal(refuseCall(f, 'eth_getBalance', [OTHER, 'latest']), undefined, 'balances are not fenced by default');
  const strict = fenced({ allowed_contracts: [A] }, { balance: true });
  t.match(refuseCall(strict, 'eth_getBalance', [OTHER, 'latest']), { kind: 'contract' }, 'unless the operator says so');
  const wallet = new Wallet(`0x${'42'.repeat(32)}`);
  const raw = await wallet.signTransaction({
    type: 2,
    chainId: 1,
    nonce: 0,
    gasLimit: 21000,
    maxFeePerGas: 2n,
    maxPriorityFeePerGas: 1n,
    to: OTHER,
  });
  t.same(await refuseCall(f, 'eth_sendRawTransaction', [raw]), {
    kind: 'contract',
    message: `eth_sendRawTransaction: contract ${OTHER} is not allowed for this key`,
  });
});

t.test("no message names the list's entries", async (t) => {
  const secrets = ['https://secret-partner.io', '*.hidden.example', '10.20.30.0/24', A, 'eth_call'];
  const f = fenced({
    allowed_origins: secrets.slice(0, 2),
    allowed_ips: [secrets[2]!],
    allowed_contracts: [A],
    allowed_methods: ['eth_call', 'eth_getLogs'],
  });
  const refusals: Array<FenceRefusal | undefined> = [
    refuseRequest(f, request(undefined, '10.20.30.1')),
    refuseRequest(f, request('https://evil.io', '10.20.30.1')),
    refuseRequest(f, request(undefined, '1.1.1.1')),
    refuseCall(f, 'eth_getLogs', [{ address: OTHER }]) as FenceRefusal | undefined,
    refuseCall(f, 'eth_getLogs', [{}]) as FenceRefusal | undefined,
    refuseCall(f, 'eth_chainId', []) as FenceRefusal | undefined,
  ];
  for (const r of refusals) {
    if (!t.ok(r, 'refused')) continue;
    for (const secret of secrets)
      t.notOk(r!.message.toLowerCase().includes(secret.toLowerCase().replace('*.', '')), `${r!.kind}: no ${secret}`);
  }
});

t.test('tokens: verified by the endpoint keys', async (t) => {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const f = fenced({ jwt_keys: [{ id: 'k', alg: 'ES256', jwk: await exportJWK(publicKey) }], jwt_max_lifetime_s: 600 });
  const nowS = Math.floor(Date.now() / 1000);
  const jwt = await new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: 'k' })
    .setIssuedAt(nowS)
    .setExpirationTime(nowS + 300)
    .sign(privateKey);
  t.equal(await refuseToken(f, jwt), undefined);
  t.equal(refuseToken(f, jwt), undefined, 'then from the cache, synchronously');
  t.same(await refuseToken(f, undefined), {
    kind: 'token',
    message: 'Signed token refused: a signed token is required (Authorization: Bearer <JWT>)',
  });
  t.same(await refuseToken(f, 'garbage'), { kind: 'token', message: 'Signed token refused: token is not a JWT' });
  const long = await new SignJWT({})
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuedAt(nowS)
    .setExpirationTime(nowS + 3000)
    .sign(privateKey);
  t.match(await refuseToken(f, long), { kind: 'token', message: /lifetime over this endpoint's 600 s/ });
});

t.test('every kind has a 403 row in the error table, but the key in the URL (401 as a missing key)', async (t) => {
  for (const [kind, code] of Object.entries(FENCE_ERRORS)) {
    t.ok(Object.hasOwn(ERRORS, code), `${kind}: ${code} is a row`);
    t.equal(ERRORS[code].http, kind === 'key_in_path' ? 401 : 403, `${kind}: HTTP status`);
  }
  t.equal(ERRORS.owner_suspended.http, 403);
  t.equal(ERRORS.owner_suspended.message, 'Owner suspended');
});

t.test('compiled settings keep the value they were made from', async (t) => {
  const s: FenceSettings = { ...NO_FENCES, allowed_methods: ['eth_call'] };
  const f = compileFences(s);
  t.equal(f.settings, s);
  t.ok(Object.isFrozen(f));
});
