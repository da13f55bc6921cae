import t from 'tap';
import { createHash } from 'node:crypto';
import { hashKey, KEY_LENGTH, KEY_PREFIX_LENGTH, looksLikeKey, newKey, randomString } from '../../src/tenancy/keys.js';

t.test('keys: long, base62, URL-path safe, prefix and SHA-256 hash', async (t) => {
  for (const kind of ['api', 'management'] as const) {
    const k = newKey(kind);
    t.equal(k.key.length, KEY_LENGTH[kind]);
    t.ok(KEY_LENGTH[kind] >= 32);
    t.match(k.key, /^[0-9A-Za-z]+$/);
    t.equal(encodeURIComponent(k.key), k.key, 'needs no escaping in a path segment');
    t.equal(k.prefix, k.key.slice(0, KEY_PREFIX_LENGTH));
    t.same(k.hash, createHash('sha256').update(k.key).digest());
    t.same(hashKey(k.key), k.hash);
    t.ok(looksLikeKey(k.key, kind));
    t.ok(looksLikeKey(k.key));
    t.notOk(looksLikeKey(k.key, kind === 'api' ? 'management' : 'api'));
  }
});

t.test('keys do not repeat and every character is about equally likely', async (t) => {
  const seen = new Set<string>();
  const counts = new Map<string, number>();
  for (let i = 0; i < 5000; i++) {
    const { key } = newKey('api');
    seen.add(key);
    for (const c of key) counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  t.equal(seen.size, 5000);
  t.equal(counts.size, 62);
  const expected = (5000 * 32) / 62;
  for (const [c, n] of counts) {
    // 2580 expected per character; a biased generator (b % 62 without rejection) gives 3097 for 0-7.
    if (Math.abs(n - expected) > 300) t.fail(`character ${c} drawn ${n} times, expected about ${Math.round(expected)}`);
  }
});

t.test('looksLikeKey refuses anything that is not a key shape', async (t) => {
  for (const s of [
    '',
    'public',
    'a'.repeat(31),
    'a'.repeat(33),
    `${'a'.repeat(31)}-`,
    `${'a'.repeat(31)}/`,
    `${'é'.repeat(32)}`,
    ' '.repeat(32),
  ]) {
    t.notOk(looksLikeKey(s), JSON.stringify(s));
  }
  t.ok(looksLikeKey('a'.repeat(32)));
});

t.test('randomString takes other alphabets', async (t) => {
  t.match(randomString(16, 'abcdefghijklmnopqrstuvwxyz234567'), /^[a-z2-7]{16}$/);
});
