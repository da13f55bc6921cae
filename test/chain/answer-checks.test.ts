import t from 'tap';
import {
  AnswerCheck,
  blockFields,
  type ChainAnswerChecks,
  checkBlock,
  checkLogs,
  checkReceipts,
  createAnswerChecks,
} from '../../src/chain/answer-checks.js';
import { KnownBlocks } from '../../src/chain/known-blocks.js';
import type { ChainConfig } from '../../src/config/schema.js';
import { methodRow } from '../../src/jsonrpc/methods.js';
import type { CheckName, UpstreamMetrics } from '../../src/metrics/registry.js';
import { ECHO_TOPIC } from '../support/contract.js';
import { textLogger } from '../support/log-lines.js';
import { rpc } from '../support/rpc.js';
import { ECHO_ADDRESS, RECIPIENT, sameChainAnvils } from '../support/same-chain.js';

const hash = (n: number): string => `0x${n.toString(16).padStart(64, '0')}`;
const OTHER = `0x${'ee'.repeat(32)}`;
const EMPTY_BLOOM = `0x${'00'.repeat(256)}`;

/** Blocks 1..n on one branch (hash n = hash(n)), with empty blooms. */
function knownUpTo(n: number): KnownBlocks {
  const known = new KnownBlocks(null, () => 0);
  for (let k = 1; k <= n; k++) known.add(k, hash(k), hash(k - 1), EMPTY_BLOOM);
  return known;
}

const answer = (result: unknown): Buffer => Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, result }));

t.test('known blocks: kept by number, dropped above a reorg, all of them under a changed parent, at most 128', async (t) => {
  const known = knownUpTo(3);
  t.equal(known.at(2)?.hash, hash(2));
  t.equal(known.withHash(hash(3).toUpperCase().replace('0X', '0x'))?.number, 3, 'found by hash in any case');
  known.add(2, OTHER, hash(1), EMPTY_BLOOM);
  t.equal(known.at(2)?.hash, OTHER, 'a reorg replaces the block');
  t.equal(known.at(3), undefined, 'and drops what was above it');
  t.equal(known.at(1)?.hash, hash(1), 'the common ancestor stays');
  known.add(3, hash(3), hash(2), EMPTY_BLOOM);
  t.equal(known.at(2), undefined, 'a head whose parent is not the block known below: the chain under it changed');
  t.equal(known.at(3)?.hash, hash(3));

  const long = knownUpTo(300);
  t.equal([...long.all()].length, 128, 'no more than DEEPEST_REORG blocks');
  t.equal(long.at(172), undefined);
  t.ok(long.at(173));

  const heard = new KnownBlocks(null, () => 0);
  heard.heard(JSON.stringify({ number: '0x5', hash: hash(5), parentHash: hash(4), logsBloom: EMPTY_BLOOM }));
  heard.heard('{not json');
  heard.heard(JSON.stringify({ number: 6 }));
  t.same(
    [...heard.all()].map((b) => [b.number, b.hash, b.bloom?.length]),
    [[5, hash(5), 256]],
    'a head the feed delivers; malformed ones are ignored',
  );
});

t.test('known blocks listen to the feed once, and again only a while after the feed dropped them', async (t) => {
  let now = 0;
  const listeners: Array<{ notify(json: string): void; lost(reason: string): void }> = [];
  let removed = 0;
  const feeds = {
    subscribe(kind: string, _params: unknown, listener: { notify(json: string): void; lost(reason: string): void }) {
      t.equal(kind, 'newHeads');
      listeners.push(listener);
      return { remove: () => removed++, live: () => true, whenLive: async () => null };
    },
  } as unknown as ConstructorParameters<typeof KnownBlocks>[0];
  const known = new KnownBlocks(feeds, () => now);
  known.listen();
  known.listen();
  t.equal(listeners.length, 1, 'one subscription');
  listeners[0]!.notify(JSON.stringify({ number: '0x1', hash: hash(1), parentHash: hash(0), logsBloom: EMPTY_BLOOM }));
  t.ok(known.at(1));
  listeners[0]!.lost('outage');
  t.equal(known.at(1), undefined, 'what was known is forgotten with the feed');
  now += 1000;
  known.listen();
  t.equal(listeners.length, 1, 'not asked again at once');
  now += 5000;
  known.listen();
  t.equal(listeners.length, 2, 'asked again after RELISTEN_MS');
  known.close();
  t.equal(removed, 1, 'close removes the listener');
});

t.test('block: the number and hash asked, and the hash known at its number', async (t) => {
  const known = knownUpTo(5);
  const block = (n: number, h: string): { number: string; hash: string } => ({ number: `0x${n.toString(16)}`, hash: h });
  t.same(checkBlock(known, { number: 3 }, block(3, hash(3))), { kind: 'pass' });
  t.match(checkBlock(known, { number: 3 }, block(4, hash(4))), { kind: 'fail', check: 'block' }, 'another number');
  t.match(checkBlock(known, { number: 3 }, block(3, OTHER)), { kind: 'fail', check: 'block' }, 'another hash than the one known');
  t.match(checkBlock(known, {}, block(3, OTHER)), { kind: 'fail', check: 'block' }, 'asked by tag: the number answered is checked');
  t.same(checkBlock(known, { number: 9 }, block(9, OTHER)), { kind: 'pass' }, 'a block not known is not compared');
  t.same(checkBlock(known, { hash: OTHER }, block(3, OTHER.toUpperCase().replace('0X', '0x'))), { kind: 'pass' }, 'by hash, any case');
  t.match(checkBlock(known, { hash: hash(3) }, block(3, hash(4))), { kind: 'fail', check: 'block' }, 'another block than the hash asked');
  t.same(checkBlock(known, { number: 3 }, null), { kind: 'pass' }, 'a null answer is not this check’s');

  t.same(blockFields(answer(block(3, hash(3)))), { number: '0x3', hash: hash(3) }, 'read from the bytes');
  const walked = Buffer.from(
    `{"jsonrpc":"2.0","id":7,"result":{"baseFeePerGas":"0x1","extraData":"0x","hash":"${OTHER}","logsBloom":"0x00","number":"0x2a","transactions":[{"hash":"0x1"}]}}`,
  );
  t.same(blockFields(walked), { number: '0x2a', hash: OTHER }, 'nested hashes are not the block’s');
  t.equal(blockFields(answer(null)), null);
  t.equal(blockFields(Buffer.from('{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x"}}')), null);
});

t.test('receipt_block: a receipt names the hash known at its block number', async (t) => {
  const known = knownUpTo(5);
  const receipt = (n: number, h: string): Record<string, string> => ({ blockNumber: `0x${n.toString(16)}`, blockHash: h });
  t.same(checkReceipts(known, receipt(2, hash(2))), { kind: 'pass' });
  t.match(checkReceipts(known, receipt(2, OTHER)), { kind: 'fail', check: 'receipt_block' });
  t.match(checkReceipts(known, [receipt(4, hash(4)), receipt(4, OTHER)]), { kind: 'fail', check: 'receipt_block' }, 'a block’s receipts');
  t.same(checkReceipts(known, receipt(8, OTHER)), { kind: 'pass' }, 'a block not known');
  t.same(checkReceipts(known, null), { kind: 'pass' });
});

t.test('logs_bloom: real logs against real blooms', async (t) => {
  const chain = await sameChainAnvils(t, 1, { logs: true });
  await chain.mineTo(0, 4);
  const url = chain.nodes[0]!.url;
  const known = new KnownBlocks(null, () => 0);
  for (let n = 0; n <= 4; n++) {
    const b = ((await rpc(url, 'eth_getBlockByNumber', [`0x${n.toString(16)}`, false])).json as { result: Record<string, string> }).result;
    known.add(n, b.hash!, b.parentHash!, b.logsBloom);
  }
  const range = { fromBlock: '0x1', toBlock: '0x4' };
  const logs = ((await rpc(url, 'eth_getLogs', [range])).json as { result: Array<Record<string, unknown>> }).result;
  t.same(
    logs.map((l) => l.blockNumber),
    ['0x2', '0x3', '0x4'],
    'blocks 2 to 4 hold a log each',
  );
  t.match(checkLogs(known, range, logs), { kind: 'pass' }, 'the true answer passes');
  t.match(checkLogs(known, { ...range, address: ECHO_ADDRESS, topics: [ECHO_TOPIC] }, logs), { kind: 'pass' });

  const moved = logs.map((l, i) => (i === 1 ? { ...l, address: RECIPIENT } : l));
  t.match(checkLogs(known, range, moved), { kind: 'fail', check: 'logs_bloom' }, 'a log whose address the bloom excludes');
  const retopic = logs.map((l, i) => (i === 1 ? { ...l, topics: [OTHER] } : l));
  t.match(checkLogs(known, range, retopic), { kind: 'fail', check: 'logs_bloom' }, 'a log whose topic the bloom excludes');
  const otherBranch = logs.map((l, i) => (i === 1 ? { ...l, address: RECIPIENT, blockHash: OTHER } : l));
  t.match(
    checkLogs(known, { fromBlock: '0x2', toBlock: '0x2' }, otherBranch),
    { kind: 'pass' },
    'a log of a block the chain does not know',
  );

  const dropped = logs.filter((_, i) => i !== 1);
  t.same(
    checkLogs(known, range, dropped),
    { kind: 'suspect', blocks: [3], withLogs: new Set([2, 4]) },
    'a block whose bloom says logs are missing',
  );
  const blockHash = (logs[1]!.blockHash as string).toUpperCase().replace('0X', '0x');
  t.match(checkLogs(known, { blockHash }, []), { kind: 'suspect', blocks: [3] }, 'asked by block hash');
  t.match(checkLogs(known, { ...range, address: RECIPIENT }, []), { kind: 'pass' }, 'a filter the blooms exclude expects nothing');
  t.match(checkLogs(known, { ...range, topics: [null, OTHER] }, []), { kind: 'pass' }, 'nor one on a topic no log has');
  t.match(checkLogs(known, { fromBlock: '0x1' }, dropped), { kind: 'pass' }, 'a range up to a tag is not known: only logs are checked');
  t.match(checkLogs(known, { fromBlock: 'earliest', toBlock: '0x3' }, []), { kind: 'suspect', blocks: [2, 3] });
  t.same(checkLogs(known, range, null), { kind: 'pass' });
});

/** A chain's checks over two nodes whose failures land in `failures`. */
function twoNodes(lines: string[]): { checks: ChainAnswerChecks; failures: Array<[number, CheckName]> } {
  const failures: Array<[number, CheckName]> = [];
  const meter = (node: number): UpstreamMetrics =>
    ({ checkFailed: (check: CheckName) => failures.push([node, check]) }) as unknown as UpstreamMetrics;
  const config = {
    slug: 'dev',
    kind: 'evm',
    consistency: { checks: true },
    upstreams: [{ name: 'a' }, { name: 'b' }],
  } as unknown as ChainConfig;
  const checks = createAnswerChecks(config, { feeds: null, meters: [meter(0), meter(1)], now: () => 0, log: textLogger(lines) })!;
  t.teardown(() => checks.close());
  return { checks, failures };
}

t.test("a call's answers across attempts: counted, logged, believed when two nodes agree", async (t) => {
  const lines: string[] = [];
  const { checks, failures } = twoNodes(lines);
  t.equal(
    checks.forCall(methodRow('eth_getBalance')!, '["0x0000000000000000000000000000000000000000","latest"]'),
    null,
    'eth_getBalance is not checked',
  );
  for (let n = 1; n <= 3; n++) checks.known.add(n, hash(n), hash(n - 1), EMPTY_BLOOM);

  const byNumber = checks.forCall(methodRow('eth_getBlockByNumber')!, '["0x2",false]')!;
  t.ok(byNumber instanceof AnswerCheck);
  t.equal(byNumber.judge(answer({ number: '0x2', hash: OTHER }), 0), 'fail', 'the first node fails');
  t.same(failures, [[0, 'block']], 'counted against it');
  t.match(lines.join('\n'), /warn upstream answers fail the gateway's checks chain=dev upstream=a check=block/);
  t.notMatch(lines.join('\n'), /0x2|false/, 'never the params');
  t.equal(byNumber.judge(answer({ number: '0x2', hash: OTHER }), 1), 'pass', 'a second node with the same answer is believed');
  t.same(failures, [[0, 'block']]);
  t.match(lines.join('\n'), /info two nodes agree on an answer that fails the gateway's checks: served chain=dev upstream=b check=block/);

  const again = checks.forCall(methodRow('eth_getBlockByNumber')!, '["0x2",false]')!;
  t.equal(again.judge(answer({ number: '0x2', hash: OTHER }), 0), 'fail');
  t.equal(again.judge(answer({ number: '0x2', hash: `0x${'dd'.repeat(32)}` }), 1), 'fail', 'another wrong answer fails too');
  t.equal(again.judge(answer({ number: '0x2', hash: hash(2) }), 1), 'pass', 'the true one passes');

  const byHash = checks.forCall(methodRow('eth_getBlockByHash')!, `["${hash(3)}",true]`)!;
  t.equal(byHash.judge(answer({ number: '0x3', hash: OTHER }), 1), 'fail');
  const receipt = checks.forCall(methodRow('eth_getTransactionReceipt')!, `["${OTHER}"]`)!;
  t.equal(receipt.judge(answer({ blockNumber: '0x1', blockHash: OTHER }), 1), 'fail');
  t.equal(receipt.judge(answer(null), 0), 'pass');
  t.same(failures.slice(1), [
    [0, 'block'],
    [1, 'block'],
    [1, 'block'],
    [1, 'receipt_block'],
  ]);
});

t.test('a suspect answer: the node is counted once another node shows the logs it left out', async (t) => {
  const { checks, failures } = twoNodes([]);
  // A bloom that holds everything: every block may hold any log.
  const full = `0x${'ff'.repeat(256)}`;
  for (let n = 1; n <= 3; n++) checks.known.add(n, hash(n), hash(n - 1), full);
  const log = (n: number): Record<string, unknown> => ({
    blockNumber: `0x${n.toString(16)}`,
    blockHash: hash(n),
    address: RECIPIENT,
    topics: [],
  });
  const params = '[{"fromBlock":"0x1","toBlock":"0x3"}]';

  const first = checks.forCall(methodRow('eth_getLogs')!, params)!;
  t.equal(first.judge(answer([log(1), log(3)]), 0), 'suspect', 'block 2 may hold logs and has none');
  t.equal(first.judge(answer([log(1), log(2), log(3)]), 1), 'pass', 'the other node has them');
  t.same(failures, [[0, 'logs_bloom']], 'the first node left a log out');

  const both = checks.forCall(methodRow('eth_getLogs')!, params)!;
  t.equal(both.judge(answer([log(1), log(3)]), 1), 'suspect');
  t.equal(both.judge(answer([log(1), log(3)]), 0), 'pass', 'a second node without them either: a false positive, served');
  t.same(failures, [[0, 'logs_bloom']], 'nobody counted');

  const filters = checks.forLogs();
  const filter = { fromBlock: '0x1', toBlock: '0x3' };
  t.equal(filters.judgeLogs(filter, [log(1), log(3)], 1), 'suspect', "the filters' logs are judged the same way");
  t.equal(filters.judgeLogs(filter, [log(1), log(2), log(3)], 0), 'pass');
  t.same(failures, [
    [0, 'logs_bloom'],
    [1, 'logs_bloom'],
  ]);
});

t.test('no checks on a chain that turns them off, nor on a beacon chain', async (t) => {
  const opts = { feeds: null, meters: [], now: () => 0 };
  const evm = { slug: 'dev', kind: 'evm', consistency: { checks: false }, upstreams: [] } as unknown as ChainConfig;
  t.equal(createAnswerChecks(evm, opts), null);
  const beacon = { slug: 'b', kind: 'beacon', consistency: { checks: true }, upstreams: [] } as unknown as ChainConfig;
  t.equal(createAnswerChecks(beacon, opts), null);
});
