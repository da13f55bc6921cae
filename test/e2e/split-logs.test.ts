/**
 * A wide eth_getLogs on chains with `split_logs: true`, end to end against a real anvil: the windows are read
 * through counting proxies (one of which answers 500 to every eth_getLogs), and what the gateway answers is
 * compared with what anvil answers directly.
 *
 * The chain is 50,000 blocks tall, but anvil starts at genesis block GENESIS: anvil_mine costs more per block
 * the longer the chain (about 1 ms at first, growing with every block), so 50,000 mined blocks would take
 * minutes. The blocks below GENESIS do not exist and anvil answers [] for them, as a node does for blocks
 * without logs; the logs are in blocks spread over the mined part, in several windows.
 */
import t, { type Test } from 'tap';
import { request as httpRequest } from 'node:http';
import { SPLIT_PARALLEL } from '../../src/pipeline/split-logs.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { ECHO_TOPIC } from '../support/contract.js';
import { countingProxy, type CountingProxy } from '../support/counting-proxy.js';
import { deployEcho, result as direct, echo } from '../support/dev-chain.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';
import { openSocket, wsUrl } from '../support/ws.js';

const GENESIS = 49_200;
const HEAD = 49_999; // blocks 0 to 49,999: a 50,000-block range
const WINDOW = 200; // max_logs_block_range
const WINDOWS = (HEAD + 1) / WINDOW;
const FINALITY_DEPTH = 10;
const LOG_RU = 50; // eth_getLogs
const HIT_RU = 25; // ceil(50 × cache.hit_ru_factor 0.5)
/** Blocks that get one Echo log each, over four windows (two of them either side of a window's edge). */
const LOG_BLOCKS = [49_260, 49_431, 49_433, 49_612, 49_799, 49_800, 49_955];
const hex = (n: number): string => `0x${n.toString(16)}`;

interface Log {
  blockNumber: string;
  data: string;
}

/** The windows (fromBlock-toBlock) of the eth_getLogs calls `proxy` saw after its first `from` of them. */
function windowsSince(proxy: CountingProxy, from: number): Set<string> {
  const calls = proxy.calls.filter((c) => c.method === 'eth_getLogs').slice(from);
  return new Set(calls.map((c) => c.params[0] as { fromBlock: string; toBlock: string }).map((f) => `${f.fromBlock}-${f.toBlock}`));
}

interface Setup {
  g: TestGateway;
  node: CountingProxy;
  flaky: CountingProxy;
  anvilUrl: string;
  address: string;
  /** An endpoint of a new owner with `ru` RU on `chain`. */
  endpoint(chain: string, ru?: number): { ownerId: number; url: string; key: string };
  available(ownerId: number): number;
}

async function setup(t: Test): Promise<Setup> {
  const anvil = await anvilFor(t, { args: ['--number', String(GENESIS)] });
  const address = await deployEcho(anvil.url);
  for (const [i, block] of LOG_BLOCKS.entries()) {
    const head = Number(await direct<string>(anvil.url, 'eth_blockNumber'));
    if (block - 1 > head) await direct(anvil.url, 'anvil_mine', [hex(block - 1 - head)]);
    await echo(anvil.url, address, hex(0xa0 + i));
  }
  const head = Number(await direct<string>(anvil.url, 'eth_blockNumber'));
  await direct(anvil.url, 'anvil_mine', [hex(HEAD - head)]);
  const node = await countingProxy(t, anvil.url);
  const flaky = await countingProxy(t, anvil.url);
  flaky.fail((call) => call.method === 'eth_getLogs');
  // The same anvil behind the other two chains, each proxy saying the chain id its chain is configured with
  // (a node naming another is out of rotation).
  const tightNode = await countingProxy(t, anvil.url);
  tightNode.answer((call) => (call.method === 'eth_chainId' ? '0x7a6a' : undefined));
  const brokenNode = await countingProxy(t, anvil.url);
  brokenNode.fail((call) => call.method === 'eth_getLogs');
  brokenNode.answer((call) => (call.method === 'eth_chainId' ? '0x7a6b' : undefined));
  const split = { max_logs_block_range: WINDOW, finality_depth: FINALITY_DEPTH, split_logs: true };
  // One worker: the response cache is each worker's own, and the ledger is read here.
  const g = await gatewayFor(t, {
    server: { workers: 1, default_chain: 'devnet' },
    chains: {
      devnet: evmChain([node.url, flaky.url], 31337, split),
      tight: evmChain([tightNode.url], 31338, { ...split, max_logs_answer_bytes: 300 }),
      broken: evmChain([brokenNode.url], 31339, split),
    },
  });
  const ctx = g.gateway.context;
  for (const slug of ['devnet', 'tight', 'broken']) {
    const chain = ctx.chains.get(slug)!;
    const until = Date.now() + 10_000;
    while (chain.head.now() !== HEAD && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    t.equal(chain.head.now(), HEAD, `${slug}: the gateway knows the head`);
  }
  return {
    g,
    node,
    flaky,
    anvilUrl: anvil.url,
    address,
    endpoint(chain, ru = 1_000_000) {
      const owner = createOwnerAdmin(ctx.tenancy.store!).createOwner(`o${Math.random()}`, 'growth', ru);
      const made = ctx.tenancy.directory!.createEndpoint(owner.id, chain, 'logs', 10);
      if (!('apiKey' in made)) throw new Error(made.error);
      return { ownerId: owner.id, url: `${g.base}/v1/rpc/${made.apiKey}`, key: made.apiKey };
    },
    available: (ownerId) => ctx.tenancy.ledger.available(ownerId),
  };
}

t.test('one anvil 50,000 blocks tall, one gateway with three splitting chains', async (t) => {
  const s = await setup(t);
  const filter = { fromBlock: 'earliest', toBlock: 'latest', address: s.address };
  const wanted = await direct<Log[]>(s.anvilUrl, 'eth_getLogs', [{ ...filter, fromBlock: '0x0', toBlock: hex(HEAD) }]);

  await t.test('a 50,000-block eth_getLogs split into windows', async (t) => {
    t.same(
      wanted.map((l) => Number(l.blockNumber)),
      LOG_BLOCKS,
      'anvil holds the logs in the blocks they were made in',
    );
    const { ownerId, url, key } = s.endpoint('devnet');

    await t.test('equals the windows read from anvil; each window costs its RU; a failing node is stepped around', async (t) => {
      const windows: Log[] = [];
      for (let i = 0; i < WINDOWS; i += 25) {
        const batch = await Promise.all(
          Array.from({ length: 25 }, (_, j) =>
            direct<Log[]>(s.anvilUrl, 'eth_getLogs', [
              { ...filter, fromBlock: hex((i + j) * WINDOW), toBlock: hex((i + j + 1) * WINDOW - 1) },
            ]),
          ),
        );
        windows.push(...batch.flat());
      }
      t.same(windows, wanted, 'the windows read one by one from anvil make the whole range');
      const before = s.available(ownerId);
      const reads = s.node.count('eth_getLogs');
      const refused = s.flaky.count('eth_getLogs');
      const r = await rpc(url, 'eth_getLogs', [filter], 'wide');
      t.equal(r.status, 200);
      t.same(r.json, { jsonrpc: '2.0', id: 'wide', result: windows }, 'one answer: the windows concatenated in order');
      t.equal(before - s.available(ownerId), WINDOWS * LOG_RU, `${WINDOWS} windows × ${LOG_RU} RU`);
      // The node's client may send a pipelined read twice (http-client.ts): what counts is that every window came.
      t.equal(windowsSince(s.node, reads).size, WINDOWS, 'every window reached the healthy node');
      t.ok(
        s.flaky.count('eth_getLogs') > refused,
        `windows sent to the failing node (${s.flaky.count('eth_getLogs') - refused}) went to the other`,
      );
    });

    await t.test('final windows come from the cache the second time, and serve a narrow call too', async (t) => {
      const before = s.available(ownerId);
      const reads = s.node.count('eth_getLogs');
      const r = await rpc(url, 'eth_getLogs', [filter], 2);
      t.same((r.json as { result: unknown }).result, wanted);
      t.equal(before - s.available(ownerId), (WINDOWS - 1) * HIT_RU + LOG_RU, 'hits for the final windows, full RU for the last one');
      t.same([...windowsSince(s.node, reads)], [`${hex(HEAD - WINDOW + 1)}-${hex(HEAD)}`], 'only the window at the head reached a node');
      const read = s.node.count('eth_getLogs');
      // The window holding blocks 49,400 to 49,599: a client asking for it alone gets the cached answer.
      const narrow = { address: s.address, fromBlock: hex(49_400), toBlock: hex(49_599) };
      const paid = s.available(ownerId);
      const one = await rpc(url, 'eth_getLogs', [narrow], 3);
      t.same(
        (one.json as { result: Log[] }).result.map((l) => l.blockNumber),
        [hex(49_431), hex(49_433)],
      );
      t.equal(paid - s.available(ownerId), HIT_RU, 'a hit');
      t.equal(s.node.count('eth_getLogs'), read, 'not read again');
    });

    await t.test("a finalized end is the nodes' finalized block", async (t) => {
      const tagged = { address: s.address, fromBlock: 'earliest', toBlock: 'finalized' };
      const r = await rpc(url, 'eth_getLogs', [tagged], 4);
      const expected = await direct<Log[]>(s.anvilUrl, 'eth_getLogs', [tagged]);
      t.ok(expected.length < wanted.length, `anvil's finalized block leaves logs out (${expected.length} of ${wanted.length})`);
      t.same((r.json as { result: unknown }).result, expected);
    });

    await t.test('over a WebSocket', async (t) => {
      const socket = await openSocket(t, wsUrl(s.g.base, `/v1/rpc/${key}`));
      const answer = await socket.call({ jsonrpc: '2.0', id: 5, method: 'eth_getLogs', params: [filter] });
      t.same(answer, { jsonrpc: '2.0', id: 5, result: wanted });
    });

    await t.test('a client that goes away stops the windows, and pays for those fetched', async (t) => {
      const client = s.endpoint('devnet');
      // Windows not cached yet (a topic makes other calls), each held 100 ms by the node.
      const filtered = { ...filter, topics: [ECHO_TOPIC] };
      s.node.delay((c) => (c.method === 'eth_getLogs' ? 100 : 0));
      t.teardown(() => s.node.delay(null));
      const reads = s.node.count('eth_getLogs');
      const req = httpRequest(client.url, { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false });
      req.on('error', () => {});
      req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getLogs', params: [filtered] }));
      await s.node.received('eth_getLogs', reads + 2 * SPLIT_PARALLEL);
      req.destroy();
      await new Promise((r) => setTimeout(r, 200));
      const stopped = s.node.count('eth_getLogs');
      await new Promise((r) => setTimeout(r, 600));
      t.equal(s.node.count('eth_getLogs'), stopped, 'no window was sent after the client left');
      const reached = windowsSince(s.node, reads).size;
      const charged = 1_000_000 - s.available(client.ownerId);
      t.ok(
        charged > 0 && charged % LOG_RU === 0 && charged <= reached * LOG_RU,
        `${charged} RU for the windows fetched of ${reached} sent`,
      );
    });

    await t.test('every window is set aside at admission: 402 when the balance does not cover them', async (t) => {
      const poor = s.endpoint('devnet', WINDOWS * LOG_RU - 1);
      const r = await rpc(poor.url, 'eth_getLogs', [filter], 6);
      t.equal(r.status, 402);
      t.same(r.json, { jsonrpc: '2.0', id: 6, error: { code: -32002, message: 'Insufficient RU balance' } });
      t.equal(s.available(poor.ownerId), WINDOWS * LOG_RU - 1, 'nothing charged');
      const narrow = await rpc(poor.url, 'eth_getLogs', [{ ...filter, fromBlock: hex(HEAD - WINDOW + 1) }], 7);
      t.equal(narrow.status, 200, 'a range of one window is one call');
    });

    await t.test('the keyless path keeps the range limit', async (t) => {
      const r = await rpc(`${s.g.base}/v1/rpc/public`, 'eth_getLogs', [filter], 8);
      t.same(r.json, {
        jsonrpc: '2.0',
        id: 8,
        error: {
          code: -32602,
          message: `eth_getLogs block range of ${HEAD + 1} blocks is larger than the limit of ${WINDOW} (chains.devnet.max_logs_block_range)`,
        },
      });
    });
  });

  await t.test('past max_logs_answer_bytes, or with a window no node answers, the call ends with an error', async (t) => {
    const tight = s.endpoint('tight');
    const r = await rpc(tight.url, 'eth_getLogs', [filter], 1);
    t.equal(r.status, 200);
    t.same(r.json, {
      jsonrpc: '2.0',
      id: 1,
      error: {
        code: -32602,
        message:
          'The eth_getLogs answer is larger than the limit of 300 bytes (chains.tight.max_logs_answer_bytes); narrow the block range or the filter',
      },
    });
    const charged = 1_000_000 - s.available(tight.ownerId);
    t.ok(charged > 0 && charged < WINDOWS * LOG_RU && charged % LOG_RU === 0, `charged for the windows fetched (${charged} RU)`);

    const broken = s.endpoint('broken');
    const failed = await rpc(broken.url, 'eth_getLogs', [filter], 2);
    t.equal(failed.status, 502);
    t.same(failed.json, { jsonrpc: '2.0', id: 2, error: { code: -32603, message: 'Upstream node error' } });
    t.equal(s.available(broken.ownerId), 1_000_000, 'refunded');
  });
});
