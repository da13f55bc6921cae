import t from 'tap';
import { createResponseCache } from '../../src/pipeline/response-cache.js';
import { cacheKeyFor } from '../../src/jsonrpc/cacheability.js';

const keyOf = (n: number): string => cacheKeyFor('eth_getBlockByNumber', [`0x${n.toString(16)}`, false])!;
const resultOf = (n: number, bytes: number): string => JSON.stringify({ number: `0x${n.toString(16)}`, pad: 'x'.repeat(bytes) });

t.test('hits and misses are counted and results come back as stored', async (t) => {
  const cache = createResponseCache(1 << 20);
  t.equal(cache.get('mainnet', keyOf(1)), undefined);
  cache.set('mainnet', keyOf(1), resultOf(1, 10));
  t.equal(cache.get('mainnet', keyOf(1)), resultOf(1, 10));
  t.equal(cache.get('mainnet', keyOf(1)), resultOf(1, 10));
  t.equal(cache.get('mainnet', keyOf(2)), undefined);
  t.same(cache.stats(), {
    entries: 1, bytes: keyOf(1).length + 2 + 'mainnet'.length + resultOf(1, 10).length, hits: 2, misses: 2,
  }, 'size is the key (with its chain) plus the result');
  cache.set('mainnet', keyOf(1), '"replaced"');
  t.equal(cache.get('mainnet', keyOf(1)), '"replaced"', 'a set replaces');
  t.equal(cache.stats().entries, 1);
});

t.test('chains are kept apart', async (t) => {
  const cache = createResponseCache(1 << 20);
  cache.set('mainnet', keyOf(1), '"main"');
  cache.set('sepolia', keyOf(1), '"test"');
  t.equal(cache.get('mainnet', keyOf(1)), '"main"');
  t.equal(cache.get('sepolia', keyOf(1)), '"test"');
  t.equal(cache.get('holesky', keyOf(1)), undefined);
  // A slug that ends like another's key begins must not reach that entry.
  cache.set('a', '"b"', '"one"');
  t.equal(cache.get('a"', 'b"'), undefined);
});

t.test('the size stays within max_bytes with many entries, evicting the least recently used', async (t) => {
  const maxBytes = 64 * 1024;
  const cache = createResponseCache(maxBytes);
  let peak = 0;
  let zeroLostAt = -1;
  for (let n = 0; n < 5000; n++) {
    cache.set('mainnet', keyOf(n), resultOf(n, (n * 37) % 900));
    // Block 0 is read after every set, so it is never the least recently used.
    if (zeroLostAt < 0 && cache.get('mainnet', keyOf(0)) === undefined) zeroLostAt = n;
    peak = Math.max(peak, cache.stats().bytes);
  }
  const stats = cache.stats();
  t.ok(peak <= maxBytes, `peak ${peak} within ${maxBytes}`);
  t.equal(zeroLostAt, -1, 'a recently read entry is never evicted');
  t.ok(stats.bytes > maxBytes * 0.9, `the cache fills up (${stats.bytes})`);
  t.ok(stats.entries > 20 && stats.entries < 5000, `evicted down to ${stats.entries}`);
  t.equal(cache.get('mainnet', keyOf(1)), undefined, 'an old unread entry was evicted');
  t.equal(cache.get('mainnet', keyOf(4999)), resultOf(4999, (4999 * 37) % 900), 'the newest is held');
});

t.test('an entry larger than an eighth of max_bytes is not stored', async (t) => {
  const maxBytes = 8000;
  const cache = createResponseCache(maxBytes);
  const key = keyOf(7);
  const overhead = key.length + '"mainnet"'.length;
  cache.set('mainnet', key, 'x'.repeat(1000 - overhead));
  t.equal(cache.stats().bytes, 1000, 'exactly an eighth is stored');
  cache.set('mainnet', key, 'y'.repeat(1001 - overhead));
  t.equal(cache.get('mainnet', key), undefined, 'one byte more is not, and the old value under the key is gone');
  t.same(cache.stats(), { entries: 0, bytes: 0, hits: 0, misses: 1 });
});

t.test('max_bytes 0 disables the cache', async (t) => {
  const cache = createResponseCache(0);
  cache.set('mainnet', keyOf(1), '"1"');
  t.equal(cache.get('mainnet', keyOf(1)), undefined);
  t.same(cache.stats(), { entries: 0, bytes: 0, hits: 0, misses: 1 });
});

t.test('a bad max_bytes is refused, naming the option', async (t) => {
  for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    t.throws(() => createResponseCache(bad), { name: 'RangeError', message: /cache\.max_bytes/ }, String(bad));
  }
  t.doesNotThrow(() => createResponseCache(7), 'a max_bytes below 8 still makes a (tiny) cache');
});
