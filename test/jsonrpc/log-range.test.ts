import t from 'tap';
import { checkLogRange } from '../../src/jsonrpc/log-range.js';

const HEAD = 20_000;
const MAX = 10_000;
const hex = (n: number): string => `0x${n.toString(16)}`;
const check = (filter: Record<string, unknown>, head: number | null = HEAD): string | undefined =>
  checkLogRange(filter, head, MAX, 'mainnet');
const refusal = (span: bigint | number): string =>
  `eth_getLogs block range of ${span} blocks is larger than the limit of ${MAX} (chains.mainnet.max_logs_block_range)`;

t.test('numeric ranges around the limit', async (t) => {
  t.equal(check({ fromBlock: hex(100), toBlock: hex(100 + MAX - 1) }), undefined, 'exactly the limit');
  t.equal(check({ fromBlock: hex(100), toBlock: hex(100 + MAX) }), refusal(MAX + 1), 'one over');
  t.equal(check({ fromBlock: hex(0), toBlock: hex(20_000) }), refusal(20_001));
  t.equal(check({ fromBlock: hex(5), toBlock: hex(5) }), undefined, 'one block');
  t.equal(check({ fromBlock: hex(500), toBlock: hex(5) }), undefined, "a reversed range is the node's to refuse");
  t.equal(
    checkLogRange({ fromBlock: '0x0', toBlock: '0x1' }, HEAD, 1, 'sepolia'),
    'eth_getLogs block range of 2 blocks is larger than the limit of 1 (chains.sepolia.max_logs_block_range)',
    'names the chain',
  );
  const huge = `0x${'f'.repeat(64)}`;
  t.equal(check({ fromBlock: '0x0', toBlock: huge }), refusal(2n ** 256n), 'a 256-bit end is counted exactly');
});

t.test('tags and omitted ends', async (t) => {
  const near = hex(HEAD - MAX + 1); // the widest start that keeps (near, head) within the limit
  const far = hex(HEAD - MAX);
  for (const tag of [undefined, null, 'latest', 'safe', 'finalized', 'pending']) {
    const to = tag === undefined ? {} : { toBlock: tag };
    t.equal(check({ fromBlock: near, ...to }), undefined, `toBlock ${String(tag)} counts as the head: within`);
    t.equal(check({ fromBlock: far, ...to }), refusal(MAX + 1), `toBlock ${String(tag)} counts as the head: one over`);
    const from = tag === undefined ? {} : { fromBlock: tag };
    t.equal(check({ ...from, toBlock: hex(HEAD + MAX - 1) }), undefined, `fromBlock ${String(tag)} counts as the head: within`);
    t.equal(check({ ...from, toBlock: hex(HEAD + MAX) }), refusal(MAX + 1), `fromBlock ${String(tag)} counts as the head: one over`);
    t.equal(check({ ...from, ...to }), undefined, `${String(tag)} to ${String(tag)} is one block`);
  }
  t.equal(check({ fromBlock: 'earliest', toBlock: hex(MAX - 1) }), undefined, 'earliest counts as 0: within');
  t.equal(check({ fromBlock: 'earliest', toBlock: hex(MAX) }), refusal(MAX + 1), 'earliest counts as 0: one over');
  t.equal(check({ fromBlock: 'earliest' }), refusal(HEAD + 1), 'earliest to the head');
  t.equal(check({ fromBlock: 'earliest', toBlock: 'latest' }, MAX - 1), undefined, 'earliest to a low head');
  t.equal(check({}), undefined, 'no ends at all: the head alone');
});

t.test('a blockHash query is one block', async (t) => {
  const hash = `0x${'ab'.repeat(32)}`;
  t.equal(check({ blockHash: hash }), undefined);
  t.equal(check({ blockHash: hash }, null), undefined, 'even with no head');
  t.equal(checkLogRange({ blockHash: hash }, HEAD, 1, 'mainnet'), undefined, 'within a limit of 1');
  t.equal(check({ blockHash: null, fromBlock: '0x0', toBlock: hex(MAX) }), refusal(MAX + 1), 'a null blockHash is absent');
});

t.test('an unknown head never refuses what needs it, but numbers are still checked', async (t) => {
  for (const filter of [
    {},
    { fromBlock: '0x0' },
    { fromBlock: 'earliest', toBlock: 'latest' },
    { fromBlock: 'safe', toBlock: hex(10 ** 9) },
  ]) {
    t.equal(check(filter, null), undefined, JSON.stringify(filter));
  }
  t.equal(check({ fromBlock: '0x0', toBlock: hex(MAX) }, null), refusal(MAX + 1));
  t.equal(check({ fromBlock: 'earliest', toBlock: hex(MAX) }, null), refusal(MAX + 1), 'earliest needs no head');
});
