import t from 'tap';
import { readCredentials, WS_PROTOCOL } from '../../src/fences/credentials.js';

const KEY = 'A'.repeat(16) + 'b'.repeat(16);
const OTHER = 'C'.repeat(32);
const JWT = 'eyJhbGciOiJFUzI1NiJ9.eyJleHAiOjF9.c2ln';
const none = { pathKey: undefined, xApiKey: '', authorization: '', wsProtocols: '' };

t.test('the key in the path, in X-API-Key, or in Authorization: Bearer', async (t) => {
  t.same(readCredentials({ ...none, pathKey: KEY }), { ok: true, key: KEY, keyPlace: 'path', token: undefined, protocol: undefined });
  t.same(readCredentials({ ...none, xApiKey: KEY }), { ok: true, key: KEY, keyPlace: 'header', token: undefined, protocol: undefined });
  t.same(readCredentials({ ...none, authorization: `Bearer ${KEY}` }), {
    ok: true,
    key: KEY,
    keyPlace: 'header',
    token: undefined,
    protocol: undefined,
  });
  t.same(readCredentials({ ...none, authorization: `bearer  ${KEY} ` }), {
    ok: true,
    key: KEY,
    keyPlace: 'header',
    token: undefined,
    protocol: undefined,
  });
  t.same(readCredentials(none), { ok: true, key: undefined, keyPlace: 'header', token: undefined, protocol: undefined }, 'nothing: no key');
});

t.test('a key in the URL is in the URL, even repeated in a header', async (t) => {
  t.match(readCredentials({ ...none, pathKey: KEY, xApiKey: KEY }), { ok: true, key: KEY, keyPlace: 'path' });
});

t.test('Bearer holds a token when it is not a key; the key then comes elsewhere', async (t) => {
  t.same(readCredentials({ ...none, xApiKey: KEY, authorization: `Bearer ${JWT}` }), {
    ok: true,
    key: KEY,
    keyPlace: 'header',
    token: JWT,
    protocol: undefined,
  });
  t.match(readCredentials({ ...none, pathKey: KEY, authorization: `Bearer ${JWT}` }), { ok: true, key: KEY, keyPlace: 'path', token: JWT });
});

t.test('refusals: two different keys, an Authorization of another scheme', async (t) => {
  t.same(readCredentials({ ...none, pathKey: KEY, xApiKey: OTHER }), { ok: false, message: 'Two different API keys given: send one' });
  t.same(readCredentials({ ...none, xApiKey: KEY, authorization: `Bearer ${OTHER}` }), {
    ok: false,
    message: 'Two different API keys given: send one',
  });
  t.match(readCredentials({ ...none, authorization: `Basic ${KEY}` }), { ok: false, message: /Bearer <key>/ });
});

t.test('WebSocket: key and token as subprotocols beside chaingate, answered with chaingate', async (t) => {
  t.same(readCredentials({ ...none, wsProtocols: `${WS_PROTOCOL}, chaingate.key.${KEY}, chaingate.jwt.${JWT}` }), {
    ok: true,
    key: KEY,
    keyPlace: 'header',
    token: JWT,
    protocol: 'chaingate',
  });
  t.match(readCredentials({ ...none, wsProtocols: `chaingate.key.${KEY}` }), { ok: false, message: /Offer the subprotocol 'chaingate'/ });
  t.same(readCredentials({ ...none, pathKey: KEY, wsProtocols: 'graphql-ws' }), {
    ok: true,
    key: KEY,
    keyPlace: 'path',
    token: undefined,
    protocol: undefined,
  });
  t.match(readCredentials({ ...none, authorization: `Bearer ${JWT}`, wsProtocols: `chaingate, chaingate.jwt.${JWT}` }), {
    ok: false,
    message: 'Two signed tokens given: send one',
  });
  t.match(readCredentials({ ...none, xApiKey: KEY, wsProtocols: `chaingate, chaingate.key.${OTHER}` }), {
    ok: false,
    message: /Two different API keys/,
  });
});
