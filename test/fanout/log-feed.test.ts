/**
 * The logs feed's rules on real anvil logs: the backfill starts at the subscription, a log already
 * delivered is recognised by (blockHash, logIndex, removed), a reorg's `removed: true` passes, and
 * after a switch a log position already delivered is not sent again; a node reset to a fresh chain is
 * followed, its logs made up for from where the feed noticed it.
 */
import t from 'tap';
import type { NodeAccess } from '../../src/fanout/feeds.js';
import { createLogFeed, logFilterKey } from '../../src/fanout/log-feed.js';
import { ECHO_TOPIC } from '../support/contract.js';
import { anvilFor, call, deployEcho, echo } from './feed-harness.js';

type Log = Record<string, unknown>;

function access(node: number, url: string, methods: unknown[][] = []): NodeAccess {
  return {
    node,
    call: (method, params) => {
      methods.push([method, ...params]);
      return call(url, method, params);
    },
    sleep: () => Promise.resolve(),
  };
}

const log = () => {};

async function logsOf(url: string, address: string): Promise<Log[]> {
  return (await call(url, 'eth_getLogs', [{ address, fromBlock: '0x0' }])) as Log[];
}

t.test('resume delivers the logs since the subscription, once, in order', async (t) => {
  const node = await anvilFor(t);
  const address = await deployEcho(node.url);
  await echo(node.url, address, '0x00'); // before the subscription: not the listeners'
  const methods: unknown[][] = [];
  const via = access(0, node.url, methods);
  const feed = createLogFeed({ address, topics: [ECHO_TOPIC] }, { log });
  t.same(feed.subscribeParams, ['logs', { address, topics: [ECHO_TOPIC] }]);
  await feed.prepare!(via);
  for (const data of ['0x01', '0x02', '0x03']) await echo(node.url, address, data);
  const out: Log[] = [];
  const deliver = (r: unknown) => void out.push(r as Log);
  const onNode = await logsOf(node.url, address);
  await feed.live(onNode[1], via, deliver); // 0x01 arrived live before the link was lost
  methods.length = 0;
  await feed.resume(via, deliver);
  t.same(
    out.map((l) => l.data),
    ['0x01', '0x02', '0x03'],
    'the live one is not sent twice',
  );
  const getLogs = methods.find((m) => m[0] === 'eth_getLogs')![1] as Log;
  t.same(
    getLogs,
    { address, topics: [ECHO_TOPIC], fromBlock: onNode[1]!.blockNumber, toBlock: onNode[3]!.blockNumber },
    "from the last live log's block to the head, with the feed's address and topics",
  );

  out.length = 0;
  await feed.resume(via, deliver);
  t.same(out, [], 'a second resume with nothing new sends nothing');
});

t.test('a log is recognised by (blockHash, logIndex, removed); removed: true passes; positions stay sent after a switch', async (t) => {
  const node = await anvilFor(t);
  const address = await deployEcho(node.url);
  await echo(node.url, address, '0x01');
  const [real] = await logsOf(node.url, address);
  const feed = createLogFeed({ address }, { log });
  const out: Log[] = [];
  const deliver = (r: unknown) => void out.push(r as Log);
  const via0 = access(0, node.url);
  const via1 = access(1, node.url);

  await feed.live(real, via0, deliver);
  await feed.live(real, via0, deliver);
  t.equal(out.length, 1, 'the same log again is dropped');
  const otherNode = { ...real, blockHash: '0x' + 'bb'.repeat(32) };
  await feed.live(otherNode, via1, deliver);
  t.equal(out.length, 1, "another node's log at a position already sent is dropped");
  const retracted = { ...real, removed: true };
  await feed.live(retracted, via0, deliver);
  await feed.live(retracted, via0, deliver);
  t.same(
    out.map((l) => l.removed ?? false),
    [false, true],
    "a reorg's removal passes, once",
  );
  const replacement = { ...real, blockHash: '0x' + 'cc'.repeat(32), data: '0x02' };
  await feed.live(replacement, via1, deliver);
  t.equal(out[2]?.data, '0x02', 'the log that replaces it at the same position is new, even from another node');
});

t.test('filters are keyed by content, not key order', async (t) => {
  t.equal(logFilterKey({ address: '0xab', topics: [['0x1', null]] }), logFilterKey({ topics: [['0x1', null]], address: '0xab' }));
  t.not(logFilterKey({ address: '0xab' }), logFilterKey({ address: '0xac' }));
  t.not(logFilterKey({ topics: ['0x1', null] }), logFilterKey({ topics: ['0x1'] }));
  t.equal(logFilterKey(undefined), logFilterKey({}));
});

t.test("a node reset to a fresh chain: the feed goes on with the new chain's logs and makes up for them after a loss", async (t) => {
  const node = await anvilFor(t);
  const address = await deployEcho(node.url);
  const lines: string[] = [];
  const feed = createLogFeed({ address }, { log: (level, msg) => void lines.push(`${level} ${msg}`) });
  const via = access(0, node.url);
  const out: Log[] = [];
  const deliver = (r: unknown) => void out.push(r as Log);
  await feed.prepare!(via);
  await echo(node.url, address, '0x01');
  for (const l of await logsOf(node.url, address)) await feed.live(l, via, deliver);
  await call(node.url, 'anvil_mine', ['0xc8']);
  await feed.resume(via, deliver); // a link lost and back on the old chain: its blocks are known complete up to 202

  await call(node.url, 'anvil_reset', []);
  t.equal(await deployEcho(node.url), address, 'the same first transaction: the contract at the same address');
  await echo(node.url, address, '0x02');
  const [fresh] = await logsOf(node.url, address);
  await feed.live(fresh, via, deliver);
  t.same(lines, ['info logs feed resumes on a new chain from block 2'], 'the new chain is noticed and logged');
  // The link is lost; a log is emitted meanwhile and must be made up for on the new chain.
  await echo(node.url, address, '0x03');
  const methods: unknown[][] = [];
  await feed.resume(access(0, node.url, methods), deliver);
  t.same(
    out.map((l) => l.data),
    ['0x01', '0x02', '0x03'],
    "the old chain's log, then the new chain's, once each",
  );
  t.ok(
    out.every((l) => l.removed !== true),
    'a reset is not a reorg: nothing is retracted',
  );
  t.same(
    methods.find((m) => m[0] === 'eth_getLogs')?.[1],
    { address, fromBlock: '0x2', toBlock: '0x3' },
    "made up for from the new chain's block",
  );
});
