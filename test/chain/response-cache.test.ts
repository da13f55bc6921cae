import t from 'tap';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createResponseCache, ENTRY_OVERHEAD_BYTES, RAW_KEY_CHARS, type ResponseCache } from '../../src/chain/response-cache.js';
import { cacheKeyFor } from '../../src/jsonrpc/cacheability.js';
import { methodRow } from '../../src/jsonrpc/methods.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const keyOf = (n: number): string => cacheKeyFor(methodRow('eth_getBlockByNumber')!, [`0x${n.toString(16)}`, false])!;
const resultOf = (n: number, bytes: number): string => JSON.stringify({ number: `0x${n.toString(16)}`, pad: 'x'.repeat(bytes) });
/** The cached result as text, or undefined. */
const text = (cache: ResponseCache, chain: string, key: string): string | undefined => cache.get(chain, key)?.toString();

t.test('hits and misses are counted and results come back as stored', async (t) => {
  const cache = createResponseCache(1 << 20);
  t.equal(text(cache, 'mainnet', keyOf(1)), undefined);
  cache.set('mainnet', keyOf(1), resultOf(1, 10));
  t.equal(text(cache, 'mainnet', keyOf(1)), resultOf(1, 10));
  t.equal(text(cache, 'mainnet', keyOf(1)), resultOf(1, 10));
  t.equal(text(cache, 'mainnet', keyOf(2)), undefined);
  t.same(
    cache.stats(),
    {
      entries: 1,
      bytes: resultOf(1, 10).length + ENTRY_OVERHEAD_BYTES,
      hits: 2,
      misses: 2,
    },
    'size is the result plus the fixed overhead of an entry',
  );
  cache.set('mainnet', keyOf(1), '"replaced"');
  t.equal(text(cache, 'mainnet', keyOf(1)), '"replaced"', 'a set replaces');
  t.equal(cache.stats().entries, 1);
});

t.test('chains are kept apart', async (t) => {
  const cache = createResponseCache(1 << 20);
  cache.set('mainnet', keyOf(1), '"main"');
  cache.set('sepolia', keyOf(1), '"test"');
  t.equal(text(cache, 'mainnet', keyOf(1)), '"main"');
  t.equal(text(cache, 'sepolia', keyOf(1)), '"test"');
  t.equal(text(cache, 'holesky', keyOf(1)), undefined);
  // A slug that ends like another's key begins must not reach that entry.
  cache.set('a', '"b"', '"one"');
  t.equal(text(cache, 'a"', 'b"'), undefined);
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
  t.equal(text(cache, 'mainnet', keyOf(1)), undefined, 'an old unread entry was evicted');
  t.equal(text(cache, 'mainnet', keyOf(4999)), resultOf(4999, (4999 * 37) % 900), 'the newest is held');
});

t.test('an entry larger than an eighth of max_bytes is not stored', async (t) => {
  const maxBytes = 8000;
  const cache = createResponseCache(maxBytes);
  const key = keyOf(7);
  const overhead = ENTRY_OVERHEAD_BYTES;
  cache.set('mainnet', key, 'x'.repeat(1000 - overhead));
  t.equal(cache.stats().bytes, 1000, 'exactly an eighth is stored');
  cache.set('mainnet', key, 'y'.repeat(1001 - overhead));
  t.equal(text(cache, 'mainnet', key), undefined, 'one byte more is not, and the old value under the key is gone');
  t.same(cache.stats(), { entries: 0, bytes: 0, hits: 0, misses: 1 });
});

t.test('max_bytes 0 disables the cache', async (t) => {
  const cache = createResponseCache(0);
  cache.set('mainnet', keyOf(1), '"1"');
  t.equal(text(cache, 'mainnet', keyOf(1)), undefined);
  t.same(cache.stats(), { entries: 0, bytes: 0, hits: 0, misses: 1 });
});

t.test('a bad max_bytes is refused, naming the option', async (t) => {
  for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    t.throws(() => createResponseCache(bad), { name: 'RangeError', message: /cache\.max_bytes/ }, String(bad));
  }
  t.doesNotThrow(() => createResponseCache(7), 'a max_bytes below 8 still makes a (tiny) cache');
});

t.test('max_bytes bounds the memory held, huge keys included', async (t) => {
  // A 2,000-address eth_getLogs key is ~90 KB of canonical JSON built from thousands of pieces: the
  // cache must hold a digest of it, not the pieces.
  const maxBytes = 8 << 20;
  const cache = createResponseCache(maxBytes);
  const addresses = Array.from({ length: 2000 }, (_, i) => `0x${i.toString(16).padStart(40, '0')}`);
  gc();
  gc();
  const before = process.memoryUsage();
  for (let n = 0; n < 2000; n++) {
    const key = cacheKeyFor(methodRow('eth_getLogs')!, [
      { fromBlock: `0x${n.toString(16)}`, toBlock: `0x${n.toString(16)}`, address: addresses },
    ])!;
    cache.set('mainnet', key, resultOf(n, 8000));
  }
  gc();
  gc();
  const after = process.memoryUsage();
  const held = after.heapUsed + after.external - before.heapUsed - before.external;
  const { bytes, entries } = cache.stats();
  t.ok(bytes <= maxBytes && bytes > maxBytes * 0.9, `full: ${entries} entries, ${bytes} bytes counted`);
  t.ok(
    held < maxBytes * 1.25,
    `the process holds ${(held / 1048576).toFixed(1)} MB for ${(maxBytes / 1048576).toFixed(0)} MB of max_bytes`,
  );
});

t.test('short calls are their own key, long ones keyed by digest: both kept apart per chain', async (t) => {
  const cache = createResponseCache(1_000_000);
  const short = '["eth_getBlockByNumber","0x10",false]';
  const long = `["eth_call",{"data":"0x${'ab'.repeat(RAW_KEY_CHARS)}","to":"0x${'11'.repeat(20)}"},"0x10"]`;
  t.ok(JSON.stringify('mainnet').length + short.length <= RAW_KEY_CHARS && long.length > RAW_KEY_CHARS, 'one of each kind');
  cache.set('mainnet', short, '"short"');
  cache.set('mainnet', long, '"long"');
  cache.set('sepolia', short, '"short on sepolia"');
  t.equal(text(cache, 'mainnet', short), '"short"');
  t.equal(text(cache, 'mainnet', long), '"long"');
  t.equal(text(cache, 'sepolia', short), '"short on sepolia"');
  t.equal(text(cache, 'sepolia', long), undefined, 'the chain is part of a digest key too');
  t.equal(text(cache, 'mainnet', `${short} `), undefined);
});
