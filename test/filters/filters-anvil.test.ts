/**
 * The gateway's own filters against a real anvil: the registry is fed with anvil's newHeads over
 * its WebSocket and reads logs with anvil's eth_getLogs, while anvil keeps filters of its own for
 * the same criteria. After each window of blocks (logs in separate blocks, several logs in one
 * block, blocks without logs, a reorg made with evm_snapshot/evm_revert) both are polled and must
 * answer the same.
 */
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { createFilterRegistry, type FilterRegistry } from '../../src/filters/filter-registry.js';
import { ECHO_TOPIC } from '../support/contract.js';
import { result as call, deployEcho, echo } from '../support/dev-chain.js';
import { anvilFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';

const OTHER_ADDRESS = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const SCOPE = 'key:anvil-test';
const HEAD_WAIT_MS = 10_000;

interface HeadFeed {
  /** Resolves once the registry has been given the head with this number and hash. */
  reached(number: number, hash: string): Promise<void>;
  head(): number | null;
  /** Holds the heads that come in, as a lagging stream would, until resume() hands them over in order. */
  pause(): void;
  resume(): void;
}

/** anvil's newHeads subscription feeding the registry, as the gateway's head stream does. */
async function feedHeads(t: Test, wsUrl: string, registry: () => FilterRegistry): Promise<HeadFeed> {
  const socket = new WebSocket(wsUrl);
  t.teardown(() => socket.terminate());
  await new Promise<void>((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  let head: number | null = null;
  const seen = new Set<string>();
  const waiters: { key: string; resolve: () => void }[] = [];
  let held: { number: string; hash: string }[] | null = null;
  socket.on('message', (data: Buffer) => {
    const msg = JSON.parse(data.toString()) as { method?: string; params?: { result: { number: string; hash: string } } };
    if (msg.method !== 'eth_subscription' || msg.params === undefined) return;
    if (held !== null) held.push(msg.params.result);
    else deliver(msg.params.result);
  });
  function deliver(result: { number: string; hash: string }): void {
    const number = Number(result.number);
    const hash = result.hash;
    head = number;
    registry().onHead(number, hash);
    seen.add(`${number}:${hash}`);
    for (const w of waiters.splice(0)) {
      if (seen.has(w.key)) w.resolve();
      else waiters.push(w);
    }
  }
  const subscribed = new Promise<void>((resolve) => socket.once('message', () => resolve()));
  socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] }));
  await subscribed;
  return {
    head: () => head,
    pause: () => {
      held ??= [];
    },
    resume: () => {
      const heads = held ?? [];
      held = null;
      for (const h of heads) deliver(h);
    },
    reached(number, hash) {
      const key = `${number}:${hash}`;
      if (seen.has(key)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`head ${key} not delivered within ${HEAD_WAIT_MS} ms`)), HEAD_WAIT_MS);
        waiters.push({
          key,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
  };
}

t.test("the registry's filters answer as anvil's own filters do, window after window", async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  let registry: FilterRegistry | undefined;
  const feed = await feedHeads(t, node.wsUrl, () => registry!);
  const getLogsCalls: Record<string, unknown>[] = [];
  registry = createFilterRegistry({
    maxPerScope: 10,
    idleTimeoutMs: 300_000,
    source: {
      head: () => feed.head(),
      getLogs: (filter) => {
        getLogsCalls.push(filter);
        return call<unknown[]>(node.url, 'eth_getLogs', [filter]);
      },
    },
  });
  t.teardown(() => registry!.close());

  /** The head the chain has now, once the registry has been given it. */
  async function settle(): Promise<number> {
    const block = await call<{ number: string; hash: string }>(node.url, 'eth_getBlockByNumber', ['latest', false]);
    await feed.reached(Number(block.number), block.hash);
    return Number(block.number);
  }
  /**
   * A transaction, by default once it is in a block: anvil answers eth_sendTransaction before it mines, so a
   * settle() right after an unmined send could read the block before it, and the registry would be polled
   * before the block that anvil's own filter, polled a moment later, already reports.
   */
  const send = (to: string, data: string, mined = true): Promise<string> => echo(node.url, to, data, mined);

  const address = await deployEcho(node.url);
  await settle();

  const criteria = { address, topics: [ECHO_TOPIC] };
  const pairs = {
    logs: { ours: registry.newFilter(SCOPE, criteria), anvil: await call<string>(node.url, 'eth_newFilter', [criteria]) },
    allLogs: { ours: registry.newFilter(SCOPE, {}), anvil: await call<string>(node.url, 'eth_newFilter', [{}]) },
    blocks: { ours: registry.newBlockFilter(SCOPE), anvil: await call<string>(node.url, 'eth_newBlockFilter') },
  };
  for (const [name, pair] of Object.entries(pairs)) t.type(pair.ours, 'string', `${name}: the registry made the filter`);

  /** Polls both sides of every pair and checks they answered the same; returns anvil's answers. */
  async function compareWindow(what: string): Promise<Record<keyof typeof pairs, unknown[]>> {
    const out = {} as Record<keyof typeof pairs, unknown[]>;
    for (const [name, pair] of Object.entries(pairs) as [keyof typeof pairs, { ours: unknown; anvil: string }][]) {
      const ours = await registry!.getFilterChanges(SCOPE, pair.ours as string);
      const theirs = await call<unknown[]>(node.url, 'eth_getFilterChanges', [pair.anvil]);
      t.same(ours, theirs, `${what}: ${name} filter changes equal anvil's`);
      out[name] = theirs;
    }
    return out;
  }

  t.same(await compareWindow('before any new block'), { logs: [], allLogs: [], blocks: [] });
  t.equal(getLogsCalls.length, 0, 'a log filter polled before any new block asks nothing of the node');

  // Window 1: three calls that log, each in its own block, an empty block and a transfer without a log.
  for (const data of ['0x01', '0x0202', '0x030303']) await send(address, data);
  await call(node.url, 'evm_mine');
  await send(OTHER_ADDRESS, '0x');
  await settle();
  const w1 = await compareWindow('window 1');
  t.equal(w1.logs.length, 3, 'anvil reported the three logs, so the comparison is not of empty answers');
  t.same(
    w1.logs.map((l) => (l as { data: string }).data),
    ['0x01', '0x0202', '0x030303'],
  );
  t.equal(w1.blocks.length, 5, 'and five new blocks');

  t.same(await compareWindow('polled again at once'), { logs: [], allLogs: [], blocks: [] }, 'nothing is reported twice');

  // Window 2: two logs in one block.
  await call(node.url, 'evm_setAutomine', [false]);
  await send(address, '0x04', false);
  await send(address, '0x05', false);
  await call(node.url, 'evm_mine');
  await call(node.url, 'evm_setAutomine', [true]);
  await settle();
  const w2 = await compareWindow('window 2');
  t.same(
    w2.logs.map((l) => (l as { logIndex: string }).logIndex),
    ['0x0', '0x1'],
    'both logs of the one block',
  );
  t.equal(w2.blocks.length, 1);

  t.same(
    await registry.getFilterLogs(SCOPE, pairs.logs.ours as string),
    await call(node.url, 'eth_getFilterLogs', [pairs.logs.anvil]),
    "eth_getFilterLogs equals anvil's (the latest block's logs: no fromBlock means latest, resolved at call time)",
  );
  const ranged = { ...criteria, fromBlock: '0x1', toBlock: '0x5' };
  const rangedOurs = registry.newFilter(SCOPE, ranged) as string;
  const rangedLogs = await registry.getFilterLogs(SCOPE, rangedOurs);
  t.equal((rangedLogs as unknown[]).length, 3, "a ranged filter's logs: blocks 1 to 5 hold the first three");
  t.same(
    rangedLogs,
    await call(node.url, 'eth_getFilterLogs', [await call<string>(node.url, 'eth_newFilter', [ranged])]),
    "and equal anvil's for the same range",
  );

  // Window 3: a reorg. Two blocks with logs are polled, then replaced by three others.
  const snapshot = await call<string>(node.url, 'evm_snapshot');
  await send(address, '0x06');
  await send(address, '0x07');
  await settle();
  const before = await compareWindow('window 3, before the reorg');
  t.equal(before.logs.length, 2);
  await call(node.url, 'evm_revert', [snapshot]);
  for (const data of ['0x08', '0x09', '0x0a']) await send(address, data);
  await settle();
  const after = await compareWindow('window 3, after the reorg');
  t.same(
    after.logs.map((l) => (l as { data: string }).data),
    ['0x08', '0x09', '0x0a'],
    'the logs of the new blocks',
  );
  t.equal(after.blocks.length, 3, "the new blocks' hashes, two of them at heights reported before");
  t.notSame(after.blocks.slice(0, 2), before.blocks, "with hashes other than the replaced blocks'");

  t.equal(registry.uninstall(SCOPE, pairs.logs.ours as string), true);
  t.same(await registry.getFilterChanges(SCOPE, pairs.logs.ours as string), { code: -32000, message: 'filter not found' });
  t.equal(await call(node.url, 'eth_uninstallFilter', [pairs.logs.anvil]), true);
  t.match(
    await rpc(node.url, 'eth_getFilterChanges', [pairs.logs.anvil]).then((r) => r.json),
    { error: { message: 'filter not found' } },
    'the same message anvil gives for a removed filter',
  );
});

t.test("a log filter polled with the node's head while the head stream lags a reorg: no log missed or read twice", async (t) => {
  // As the gateway polls: the head is the node's eth_blockNumber asked just before the call, while reorgs
  // are known only from the head stream. Here the stream is held back across a reorg, as a loaded one lags.
  const node = await anvilFor(t, { chainId: 31337 });
  let registry: FilterRegistry | undefined;
  const feed = await feedHeads(t, node.wsUrl, () => registry!);
  let nodeHead: number | null = null;
  registry = createFilterRegistry({
    maxPerScope: 10,
    idleTimeoutMs: 300_000,
    source: { head: () => nodeHead, getLogs: (filter) => call<unknown[]>(node.url, 'eth_getLogs', [filter]) },
  });
  t.teardown(() => registry!.close());
  async function settle(): Promise<void> {
    const block = await call<{ number: string; hash: string }>(node.url, 'eth_getBlockByNumber', ['latest', false]);
    await feed.reached(Number(block.number), block.hash);
  }
  /** One eth_getFilterChanges of the registry's filter, the node's head asked first (chain/filters.ts's refreshHead). */
  async function poll(id: string): Promise<string[]> {
    nodeHead = Number(await call<string>(node.url, 'eth_blockNumber'));
    return ((await registry!.getFilterChanges(SCOPE, id)) as { data: string }[]).map((l) => l.data);
  }
  const address = await deployEcho(node.url);
  await settle();
  nodeHead = Number(await call<string>(node.url, 'eth_blockNumber'));
  const criteria = { address, topics: [ECHO_TOPIC] };
  const ours = registry.newFilter(SCOPE, criteria) as string;
  const anvils = await call<string>(node.url, 'eth_newFilter', [criteria]);
  const anvilChanges = async (): Promise<string[]> =>
    (await call<{ data: string }[]>(node.url, 'eth_getFilterChanges', [anvils])).map((l) => l.data);

  const snapshot = await call<string>(node.url, 'evm_snapshot');
  for (const data of ['0x06', '0x07']) await echo(node.url, address, data);
  await settle();
  t.same(await poll(ours), ['0x06', '0x07'], 'the two logs before the reorg');
  t.same(await anvilChanges(), ['0x06', '0x07'], 'as anvil reports them');

  feed.pause();
  await call(node.url, 'evm_revert', [snapshot]);
  for (const data of ['0x08', '0x09', '0x0a']) await echo(node.url, address, data);
  const during = await poll(ours);
  feed.resume();
  await settle();
  const after = await poll(ours);
  t.comment(`polled while the stream lagged: [${during.join(', ')}], then [${after.join(', ')}]`);
  const theirs = await anvilChanges();
  t.same(theirs, ['0x08', '0x09', '0x0a'], "anvil's filter reports the three new logs");
  t.same([...during, ...after], theirs, 'and the two polls together report exactly those, once each, in order');
});
