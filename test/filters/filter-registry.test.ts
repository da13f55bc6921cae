import t from 'tap';
import {
  createFilterRegistry,
  type FilterRegistry,
  type FilterRegistryOptions,
  type FilterSource,
} from '../../src/filters/filter-registry.js';

const NOT_FOUND = { code: -32000, message: 'filter not found' };
const TOO_MANY = { code: -32000, message: 'too many filters' };
const IDLE_MS = 300_000;
const hashOf = (n: number, fork = 0): string => `0x${fork.toString(16).padStart(2, '0')}${n.toString(16).padStart(62, '0')}`;

interface FakeChain extends FilterSource {
  headAt: number | null;
  /** The filters eth_getLogs was called with, in order. */
  calls: Record<string, unknown>[];
  /** When set, the next getLogs calls wait for release() (or fail with fail()). */
  hold: boolean;
  release(): void;
  fail(message: string): void;
  failNext: string | null;
}

function blockNumber(tag: unknown, head: number | null): number {
  if (tag === 'latest') return head ?? -1;
  if (tag === 'earliest') return 0;
  return Number(tag);
}

/** The log the fake chain holds in block n. */
const logAt = (n: number): Record<string, string> => ({ blockNumber: `0x${n.toString(16)}`, logIndex: '0x0' });

/** A chain with one log per block; eth_getLogs answers the logs of the numeric range it was asked for. */
function fakeChain(head: number | null): FakeChain {
  const waiting: { resolve: () => void; reject: (e: Error) => void }[] = [];
  const chain: FakeChain = {
    headAt: head,
    calls: [],
    hold: false,
    failNext: null,
    head: () => chain.headAt,
    async getLogs(filter) {
      chain.calls.push(filter);
      if (chain.failNext !== null) {
        const message = chain.failNext;
        chain.failNext = null;
        throw new Error(message);
      }
      if (chain.hold) await new Promise<void>((resolve, reject) => waiting.push({ resolve, reject }));
      const from = blockNumber(filter.fromBlock, chain.headAt);
      const to = blockNumber(filter.toBlock, chain.headAt);
      const logs: unknown[] = [];
      for (let n = from; n <= to; n++) logs.push(logAt(n));
      return logs;
    },
    release: () => {
      for (const w of waiting.splice(0)) w.resolve();
    },
    fail: (message) => {
      for (const w of waiting.splice(0)) w.reject(new Error(message));
    },
  };
  return chain;
}

interface Harness {
  registry: FilterRegistry;
  chain: FakeChain;
  advance(ms: number): void;
  sweep(): void;
  sweepEveryMs: number;
  stopped: () => boolean;
  wantsSeen: { heads: boolean; pending: boolean }[];
}

function harness(over: Partial<FilterRegistryOptions> = {}, head: number | null = 10): Harness {
  let now = 1_000;
  let sweepFn: (() => void) | undefined;
  let sweepEveryMs = 0;
  let stopped = false;
  const chain = fakeChain(head);
  const wantsSeen: { heads: boolean; pending: boolean }[] = [];
  const registry = createFilterRegistry({
    source: chain,
    maxPerScope: 100,
    idleTimeoutMs: IDLE_MS,
    now: () => now,
    every: (ms, fn) => {
      sweepEveryMs = ms;
      sweepFn = fn;
      return () => {
        stopped = true;
      };
    },
    onWantsChange: (w) => wantsSeen.push(w),
    ...over,
  });
  return {
    registry,
    chain,
    wantsSeen,
    sweepEveryMs,
    advance: (ms) => {
      now += ms;
    },
    sweep: () => sweepFn!(),
    stopped: () => stopped,
  };
}

function idOf(made: unknown): string {
  if (typeof made !== 'string') throw new Error(`expected a filter id, got ${JSON.stringify(made)}`);
  return made;
}

t.test('ids are 0x + up to 32 random hex digits without leading zeros, never repeated', async (t) => {
  const { registry } = harness({ maxPerScope: 500 });
  const ids = new Set<string>();
  for (let i = 0; i < 500; i++) ids.add(idOf(registry.newBlockFilter('key:a')));
  t.equal(ids.size, 500, 'every id is new');
  for (const id of ids) t.match(id, /^0x[1-9a-f][0-9a-f]{0,31}$/);
  const full = [...ids].filter((id) => id.length === 34).length;
  t.ok(full > 400, `most ids carry the full 16 bytes (${full} of 500; 15/16 expected)`);
});

t.test('a filter belongs to its scope: another scope gets exactly the unknown-id answer', async (t) => {
  const { registry } = harness();
  const id = idOf(registry.newBlockFilter('key:a'));
  const logId = idOf(registry.newFilter('key:a', {}));
  registry.onHead(11, hashOf(11));

  t.same(await registry.getFilterChanges('ip:127.0.0.1', id), NOT_FOUND, 'another scope: filter not found');
  t.same(await registry.getFilterChanges('key:b', id), NOT_FOUND);
  t.same(await registry.getFilterLogs('key:b', logId), NOT_FOUND, 'eth_getFilterLogs too');
  t.same(await registry.getFilterChanges('key:b', '0x1234'), NOT_FOUND, 'the same answer as an id nobody has');
  t.equal(registry.uninstall('key:b', id), false, 'eth_uninstallFilter from another scope: false');
  t.same(await registry.getFilterChanges('key:a', id), [hashOf(11)], 'the owner still has it, untouched by the others');
});

t.test('ids compare without regard to case or leading zeros', async (t) => {
  const { registry } = harness();
  const id = idOf(registry.newBlockFilter('key:a'));
  registry.onHead(11, hashOf(11));
  t.same(await registry.getFilterChanges('key:a', `0x${id.slice(2).toUpperCase()}`), [hashOf(11)], 'upper-case hex');
  registry.onHead(12, hashOf(12));
  t.same(await registry.getFilterChanges('key:a', `0x${id.slice(2).padStart(64, '0')}`), [hashOf(12)], 'zero-padded to 32 bytes');
  t.equal(registry.uninstall('key:a', id.toUpperCase().replace('0X', '0x')), true);
});

t.test('at most maxPerScope filters per scope; uninstalled and expired ones free their places', async (t) => {
  const { registry, advance } = harness({ maxPerScope: 3 });
  const a1 = idOf(registry.newBlockFilter('key:a'));
  idOf(registry.newFilter('key:a', {}));
  idOf(registry.newPendingTransactionFilter('key:a'));
  t.same(registry.newBlockFilter('key:a'), TOO_MANY, 'the 4th block filter: too many filters (-32000, not -32005)');
  t.same(registry.newFilter('key:a', {}), TOO_MANY, 'the 4th log filter too');
  t.same(registry.newPendingTransactionFilter('key:a'), TOO_MANY);
  t.equal(registry.size(), 3, 'the refusals made nothing');
  t.type(registry.newBlockFilter('key:b'), 'string', 'another scope has its own allowance');

  t.equal(registry.uninstall('key:a', a1), true);
  const a4 = idOf(registry.newBlockFilter('key:a'));
  t.same(registry.newBlockFilter('key:a'), TOO_MANY, 'full again');

  advance(IDLE_MS / 2);
  t.same(await registry.getFilterChanges('key:a', a4), [], 'this one stays alive');
  advance(IDLE_MS / 2);
  t.type(registry.newBlockFilter('key:a'), 'string', 'the two idle ones expired and made room');
  t.type(registry.newBlockFilter('key:a'), 'string');
  t.same(registry.newBlockFilter('key:a'), TOO_MANY);
});

t.test('maxFilters bounds all scopes together', async (t) => {
  const { registry, advance } = harness({ maxFilters: 4, maxPerScope: 10 });
  for (const ip of ['1', '2', '3', '4']) idOf(registry.newBlockFilter(`ip:10.0.0.${ip}`));
  t.same(registry.newBlockFilter('ip:10.0.0.5'), TOO_MANY);
  advance(IDLE_MS);
  t.type(registry.newBlockFilter('ip:10.0.0.5'), 'string', 'expired filters of other scopes make room');
  t.equal(registry.size(), 1);
});

t.test('a filter expires after idleTimeoutMs without eth_getFilterChanges, and not before', async (t) => {
  const { registry, advance, sweep } = harness();
  const block = idOf(registry.newBlockFilter('key:a'));
  const logs = idOf(registry.newFilter('key:a', { fromBlock: '0x1' }));

  advance(IDLE_MS - 1);
  t.same(await registry.getFilterChanges('key:a', block), [], 'one ms short of the timeout: still there');
  t.same(await registry.getFilterLogs('key:a', logs), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(logAt), 'eth_getFilterLogs answers');
  advance(1);
  t.same(
    await registry.getFilterChanges('key:a', logs),
    NOT_FOUND,
    'the log filter was read with eth_getFilterLogs only, which does not keep a filter alive (as on geth)',
  );
  t.equal(registry.size(), 1, 'found expired on access and dropped');

  advance(IDLE_MS - 2);
  t.same(await registry.getFilterChanges('key:a', block), [], 'each poll restarts the idle time');
  advance(IDLE_MS - 1);
  sweep();
  t.equal(registry.size(), 1, 'the sweep keeps a filter polled within the timeout');
  advance(1);
  sweep();
  t.equal(registry.size(), 0, 'and frees it once the timeout has passed, unasked');
  t.equal(registry.uninstall('key:a', block), false, 'an expired filter cannot be uninstalled');
});

t.test('the sweep runs on one coarse timer, stopped by close()', async (t) => {
  const h = harness();
  t.equal(h.sweepEveryMs, 30_000, 'every 30 s for a 300 s timeout');
  t.equal(harness({ idleTimeoutMs: 5000 }).sweepEveryMs, 5000, 'every timeout when that is shorter');
  t.equal(harness({ idleTimeoutMs: 10 }).sweepEveryMs, 1000, 'never more often than once a second');
  idOf(h.registry.newBlockFilter('key:a'));
  h.registry.close();
  t.ok(h.stopped(), 'close() stops it');
  t.equal(h.registry.size(), 0, 'and drops every filter');
  t.same(h.registry.wants(), { heads: false, pending: false });
});

t.test('options are checked', async (t) => {
  const source = fakeChain(1);
  t.throws(() => createFilterRegistry({ source, maxPerScope: 0, idleTimeoutMs: 1 }), /maxPerScope must be a positive integer/);
  t.throws(() => createFilterRegistry({ source, maxPerScope: 1, idleTimeoutMs: -5 }), /idleTimeoutMs must be a positive integer/);
  t.throws(() => createFilterRegistry({ source, maxPerScope: 1, idleTimeoutMs: 1, maxQueuedPerFilter: 1.5 }), /maxQueuedPerFilter/);
});

t.test('block filter: the new block hashes since the last poll, in order, reorgs included', async (t) => {
  const { registry } = harness();
  registry.onHead(10, hashOf(10));
  const id = idOf(registry.newBlockFilter('key:a'));
  t.same(await registry.getFilterChanges('key:a', id), [], 'blocks from before the filter are not changes');
  registry.onHead(11, hashOf(11));
  registry.onHead(12, hashOf(12));
  registry.onHead(12, hashOf(12));
  t.same(await registry.getFilterChanges('key:a', id), [hashOf(11), hashOf(12)], 'in order; a repeated head counts once');
  t.same(await registry.getFilterChanges('key:a', id), [], 'nothing new since the last poll');

  registry.onHead(13, hashOf(13));
  registry.onHead(12, hashOf(12, 1));
  registry.onHead(13, hashOf(13, 1));
  registry.onHead(14, hashOf(14, 1));
  t.same(
    await registry.getFilterChanges('key:a', id),
    [hashOf(13), hashOf(12, 1), hashOf(13, 1), hashOf(14, 1)],
    "after a reorg, the new blocks' hashes",
  );

  const late = idOf(registry.newBlockFilter('key:a'));
  registry.onHead(15, hashOf(15, 1));
  t.same(await registry.getFilterChanges('key:a', late), [hashOf(15, 1)], 'a second filter starts at its own creation');
  t.same(await registry.getFilterChanges('key:a', id), [hashOf(15, 1)], 'while the first one reads on');
});

t.test('pending filter: the transaction hashes seen since the last poll', async (t) => {
  const { registry } = harness();
  registry.onPendingTransaction(hashOf(1));
  const id = idOf(registry.newPendingTransactionFilter('key:a'));
  registry.onPendingTransaction(hashOf(2));
  registry.onPendingTransaction(hashOf(3));
  t.same(await registry.getFilterChanges('key:a', id), [hashOf(2), hashOf(3)]);
  t.same(await registry.getFilterChanges('key:a', id), []);
  t.same(await registry.getFilterLogs('key:a', id), NOT_FOUND, 'eth_getFilterLogs of a pending filter: filter not found, as geth');
  const block = idOf(registry.newBlockFilter('key:a'));
  registry.onPendingTransaction(hashOf(4));
  t.same(await registry.getFilterChanges('key:a', block), [], 'a block filter sees no transactions');
});

t.test('hashes kept between polls are bounded; the oldest are dropped', async (t) => {
  const { registry } = harness({ maxQueuedPerFilter: 5 });
  const blocks = idOf(registry.newBlockFilter('key:a'));
  const pending = idOf(registry.newPendingTransactionFilter('key:a'));
  for (let n = 1; n <= 8; n++) {
    registry.onHead(10 + n, hashOf(10 + n));
    registry.onPendingTransaction(hashOf(100 + n));
  }
  t.same(
    await registry.getFilterChanges('key:a', blocks),
    [14, 15, 16, 17, 18].map((n) => hashOf(n)),
    'the newest 5 blocks',
  );
  t.same(
    await registry.getFilterChanges('key:a', pending),
    [104, 105, 106, 107, 108].map((n) => hashOf(n)),
    'the newest 5 transactions',
  );
  registry.onPendingTransaction(hashOf(109));
  t.same(await registry.getFilterChanges('key:a', pending), [hashOf(109)], 'and then one at a time again');
});

t.test('wants() follows the open filters', async (t) => {
  const { registry, wantsSeen, advance, sweep } = harness();
  t.same(registry.wants(), { heads: false, pending: false }, 'nothing open, nothing needed');
  const block = idOf(registry.newBlockFilter('key:a'));
  t.same(registry.wants(), { heads: true, pending: false });
  const pending = idOf(registry.newPendingTransactionFilter('key:a'));
  t.same(registry.wants(), { heads: true, pending: true });
  const logs = idOf(registry.newFilter('key:a', {}));
  registry.uninstall('key:a', block);
  t.same(registry.wants(), { heads: true, pending: true }, 'a log filter wants heads too, to see reorgs');
  registry.uninstall('key:a', logs);
  t.same(registry.wants(), { heads: false, pending: true });
  advance(IDLE_MS);
  sweep();
  t.same(registry.wants(), { heads: false, pending: false }, 'the sweep closes what expired');
  t.same(
    wantsSeen,
    [
      { heads: true, pending: false },
      { heads: true, pending: true },
      { heads: false, pending: true },
      { heads: false, pending: false },
    ],
    'onWantsChange was told each change once',
  );
  t.equal(registry.uninstall('key:a', pending), false);
});

t.test('log filter: each poll reads the blocks after the last one covered, up to the head', async (t) => {
  const { registry, chain } = harness({}, 10);
  const id = idOf(registry.newFilter('key:a', { address: '0x00000000000000000000000000000000000000aa', topics: [hashOf(1)] }));
  t.same(await registry.getFilterChanges('key:a', id), [], 'polled before any new block: nothing');
  t.equal(chain.calls.length, 0, 'without asking a node');

  chain.headAt = 12;
  t.same(await registry.getFilterChanges('key:a', id), [logAt(11), logAt(12)]);
  t.same(
    chain.calls.at(-1),
    {
      address: '0x00000000000000000000000000000000000000aa',
      topics: [hashOf(1)],
      fromBlock: '0xb',
      toBlock: '0xc',
    },
    "eth_getLogs from the block after the head at creation to the head, with the filter's criteria",
  );
  t.same(await registry.getFilterChanges('key:a', id), [], 'no new block, nothing');
  t.equal(chain.calls.length, 1, 'and no call');

  chain.headAt = 13;
  chain.failNext = 'upstream down';
  await t.rejects(registry.getFilterChanges('key:a', id), /upstream down/, 'a failed eth_getLogs rejects the poll');
  chain.headAt = 14;
  t.same(await registry.getFilterChanges('key:a', id), [logAt(13), logAt(14)], 'the next poll covers the failed range again');
  t.match(chain.calls.at(-1), { fromBlock: '0xd', toBlock: '0xe' });
});

t.test('log filter bounds: a later fromBlock waits, a toBlock ends the filter', async (t) => {
  const { registry, chain } = harness({}, 12);
  const id = idOf(registry.newFilter('key:a', { fromBlock: '0x14', toBlock: '0x18' }));
  chain.headAt = 15;
  t.same(await registry.getFilterChanges('key:a', id), [], 'head still before fromBlock');
  t.equal(chain.calls.length, 0);
  chain.headAt = 22;
  t.equal(((await registry.getFilterChanges('key:a', id)) as unknown[]).length, 3);
  t.match(chain.calls.at(-1), { fromBlock: '0x14', toBlock: '0x16' }, 'from fromBlock, not from the head at creation');
  chain.headAt = 30;
  t.equal(((await registry.getFilterChanges('key:a', id)) as unknown[]).length, 2);
  t.match(chain.calls.at(-1), { fromBlock: '0x17', toBlock: '0x18' }, 'up to toBlock, not the head');
  chain.headAt = 31;
  t.same(await registry.getFilterChanges('key:a', id), [], 'past toBlock nothing more');
  t.equal(chain.calls.length, 2);

  const early = idOf(registry.newFilter('key:a', { fromBlock: 'earliest' }));
  chain.headAt = 33;
  await registry.getFilterChanges('key:a', early);
  t.match(chain.calls.at(-1), { fromBlock: '0x20', toBlock: '0x21' }, 'an old fromBlock still only reports blocks mined after creation');
  t.notOk('blockHash' in chain.calls.at(-1)!);
});

t.test("eth_getFilterLogs: eth_getLogs over the filter's own range", async (t) => {
  const { registry, chain } = harness({}, 10);
  const open = idOf(registry.newFilter('key:a', { topics: [hashOf(7)] }));
  await registry.getFilterLogs('key:a', open);
  t.same(
    chain.calls.at(-1),
    { topics: [hashOf(7)], fromBlock: 'latest', toBlock: 'latest' },
    'no bounds: latest to latest, resolved by the node at call time, as geth does',
  );
  const ranged = idOf(registry.newFilter('key:a', { fromBlock: '0x2', toBlock: '0x4' }));
  t.same(await registry.getFilterLogs('key:a', ranged), [2, 3, 4].map(logAt));
  t.same(chain.calls.at(-1), { fromBlock: '0x2', toBlock: '0x4' });
  const pinned = idOf(registry.newFilter('key:a', { blockHash: hashOf(3), address: null }));
  const pinnedCalls = chain.calls.length;
  chain.getLogs = async (f) => {
    chain.calls.push(f);
    return [{ blockHash: f.blockHash }];
  };
  t.same(await registry.getFilterLogs('key:a', pinned), [{ blockHash: hashOf(3) }]);
  t.same(chain.calls.at(-1), { blockHash: hashOf(3), address: null }, 'a blockHash filter asks for that block');
  chain.headAt = 20;
  t.same(await registry.getFilterChanges('key:a', pinned), [], 'and has no new blocks to report');
  t.equal(chain.calls.length, pinnedCalls + 1);
});

t.test('eth_newFilter refuses what geth refuses, and makes nothing', async (t) => {
  const { registry } = harness();
  const invalid = { code: -32000, message: 'invalid block range params' };
  t.same(registry.newFilter('key:a', { fromBlock: 'pending' }), { code: -32000, message: 'pending logs are not supported' });
  t.same(registry.newFilter('key:a', { toBlock: 'pending' }), { code: -32000, message: 'pending logs are not supported' });
  t.same(registry.newFilter('key:a', { fromBlock: 'safe' }), invalid);
  t.same(registry.newFilter('key:a', { fromBlock: '0x1', toBlock: 'finalized' }), invalid);
  t.same(registry.newFilter('key:a', { fromBlock: '0x5', toBlock: '0x4' }), invalid, 'toBlock before fromBlock');
  t.same(registry.newFilter('key:a', { toBlock: '0x40' }), invalid, 'a numeric toBlock after a latest fromBlock');
  t.same(registry.newFilter('key:a', { topics: [null, null, null, null, null] }), { code: -32000, message: 'exceed max topics' });
  t.equal(registry.size(), 0);
  t.type(registry.newFilter('key:a', { fromBlock: '0x5', toBlock: '0x5', topics: [null, null, null, null] }), 'string');
});

t.test('log filter and reorgs: a replaced block is read again', async (t) => {
  const { registry, chain } = harness({}, 10);
  registry.onHead(10, hashOf(10));
  const id = idOf(registry.newFilter('key:a', {}));
  registry.onHead(11, hashOf(11));
  registry.onHead(12, hashOf(12));
  chain.headAt = 12;
  await registry.getFilterChanges('key:a', id);
  t.match(chain.calls.at(-1), { fromBlock: '0xb', toBlock: '0xc' });

  registry.onHead(12, hashOf(12));
  chain.headAt = 13;
  registry.onHead(13, hashOf(13));
  await registry.getFilterChanges('key:a', id);
  t.match(chain.calls.at(-1), { fromBlock: '0xd', toBlock: '0xd' }, 'a repeated head is no reorg');

  registry.onHead(12, hashOf(12, 1));
  registry.onHead(13, hashOf(13, 1));
  await registry.getFilterChanges('key:a', id);
  t.match(chain.calls.at(-1), { fromBlock: '0xc', toBlock: '0xd' }, 'the new blocks 12 and 13 are read');

  // A reorg while a poll is in flight: the poll's answer must not move the filter past the new blocks.
  chain.headAt = 15;
  registry.onHead(14, hashOf(14, 1));
  registry.onHead(15, hashOf(15, 1));
  chain.hold = true;
  const inFlight = registry.getFilterChanges('key:a', id);
  await new Promise((r) => setImmediate(r));
  t.match(chain.calls.at(-1), { fromBlock: '0xe', toBlock: '0xf' });
  registry.onHead(14, hashOf(14, 2));
  registry.onHead(15, hashOf(15, 2));
  chain.release();
  await inFlight;
  chain.hold = false;
  const calls = chain.calls.length;
  await registry.getFilterChanges('key:a', id);
  t.equal(chain.calls.length, calls + 1, 'the next poll asks again');
  t.match(chain.calls.at(-1), { fromBlock: '0xe', toBlock: '0xf' }, 'for the reorged blocks');
});

t.test('polls of one log filter run one after the other', async (t) => {
  const { registry, chain } = harness({}, 10);
  const id = idOf(registry.newFilter('key:a', {}));
  chain.headAt = 12;
  chain.hold = true;
  const first = registry.getFilterChanges('key:a', id);
  const second = registry.getFilterChanges('key:a', id);
  await new Promise((r) => setImmediate(r));
  t.equal(chain.calls.length, 1, 'the second poll waits for the first');
  chain.headAt = 13;
  chain.release();
  t.equal(((await first) as unknown[]).length, 2);
  await new Promise((r) => setImmediate(r));
  chain.release();
  t.same(await second, [logAt(13)], 'and covers only what the first did not');

  chain.headAt = 14;
  const failing = registry.getFilterChanges('key:a', id);
  const after = registry.getFilterChanges('key:a', id);
  await new Promise((r) => setImmediate(r));
  chain.fail('reset');
  await t.rejects(failing, /reset/);
  await new Promise((r) => setImmediate(r));
  chain.release();
  t.same(await after, [logAt(14)], 'a failed poll does not block the next one');
});

t.test('a log filter made before any head is known starts at the first head seen', async (t) => {
  const { registry, chain } = harness({}, null);
  const id = idOf(registry.newFilter('key:a', {}));
  t.same(await registry.getFilterChanges('key:a', id), [], 'no head, nothing');
  chain.headAt = 40;
  t.same(await registry.getFilterChanges('key:a', id), [], 'the first head known is where it starts');
  chain.headAt = 41;
  await registry.getFilterChanges('key:a', id);
  t.match(chain.calls, [{ fromBlock: '0x29', toBlock: '0x29' }]);
});
