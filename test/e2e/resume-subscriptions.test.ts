/**
 * Subscriptions that resume (docs/websocket.md#resuming-after-a-drop), end to end through a gateway with two
 * worker threads in front of a real anvil: a client that reconnects with `fromBlock` gets the heads or logs it
 * missed, in order, then the live ones, with no gap and no duplicate, while blocks keep coming during the
 * replay; heads past subscriptions.replay_blocks are refused naming it, logs past it are fetched; a reorg while
 * away is replayed as the chain now is; and each replayed notification is charged as a live one.
 */
import t, { type Test } from 'tap';
import type { AnvilNode } from '../../src/devnet/anvil.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { ECHO_TOPIC, RUNTIME_BYTECODE } from '../support/contract.js';
import { anvilFor, gatewayFor, type TestGateway } from '../support/gateway.js';
import { nodeCall, openSubscriber, type Subscriber, waitUntil } from '../support/subscriber.js';
import { wsUrl } from '../support/ws.js';
import { waitFor } from '../support/wait-for.js';

const DEV_ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const ECHO_ADDRESS = '0x00000000000000000000000000000000000ec40e';
const ECHO_FILTER = { address: ECHO_ADDRESS, topics: [ECHO_TOPIC] };

const hex = (n: number): string => `0x${n.toString(16)}`;
const numberOf = (r: Record<string, unknown>): number => parseInt(r.number as string, 16);
const blockNumber = async (node: AnvilNode): Promise<number> => Number(await nodeCall<string>(node.url, 'eth_blockNumber'));
const mine = (node: AnvilNode, n = 1): Promise<unknown> => nodeCall(node.url, 'anvil_mine', [hex(n)]);
/** Emits one echo log and resolves once its block is mined: anvil may answer eth_sendTransaction before the
 *  block with it is sealed (under load, the next eth_blockNumber can still be the block before). */
const emitEcho = async (node: AnvilNode, i: number): Promise<string> => {
  const hash = await nodeCall<string>(node.url, 'eth_sendTransaction', [
    { from: DEV_ADDRESS, to: ECHO_ADDRESS, data: `0x${i.toString(16).padStart(8, '0')}`, gas: '0x30000' },
  ]);
  await waitFor(async () => (await nodeCall<unknown>(node.url, 'eth_getTransactionReceipt', [hash])) !== null, {
    what: `echo ${i} mined`,
  });
  return hash;
};
const logKey = (l: Record<string, unknown>): string => `${l.blockHash as string}:${l.logIndex as string}:${l.removed === true}`;

async function devnet(t: Test, extra: Record<string, unknown> = {}): Promise<{ node: AnvilNode; g: TestGateway; url: string }> {
  const node = await anvilFor(t, { chainId: 31337 });
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.url.replace('http', 'ws') }] } },
    ...extra,
  });
  await nodeCall(node.url, 'anvil_setCode', [ECHO_ADDRESS, RUNTIME_BYTECODE]);
  return { node, g, url: wsUrl(g.base, '/v1/rpc/public') };
}

/** The canonical header hash of each block `from`..`to`, asked of the node. */
async function canonicalHashes(node: AnvilNode, from: number, to: number): Promise<string[]> {
  const out: string[] = [];
  for (let n = from; n <= to; n++) out.push((await nodeCall<{ hash: string }>(node.url, 'eth_getBlockByNumber', [hex(n), false])).hash);
  return out;
}

/** Heads received by subscription `id` of `s` up to block `to`: numbers `from`..`to` once each, in order. */
async function headsUpTo(s: Subscriber, id: string, to: number): Promise<Array<Record<string, unknown>>> {
  await waitUntil(
    () => s.resultsOf(id).some((r) => numberOf(r) >= to),
    20_000,
    `heads up to ${to}`,
    () => s.resultsOf(id).map(numberOf).join(','),
  );
  return s.resultsOf(id).filter((r) => numberOf(r) <= to);
}

t.test('newHeads resumes from fromBlock: missed heads, then live ones, no gap, no duplicate (ws, workers: 2)', async (t) => {
  const { node, url } = await devnet(t);
  const first = await openSubscriber(t, url);
  const id = await first.subscribe('newHeads');
  await mine(node, 3);
  const seen = await headsUpTo(first, id, await blockNumber(node));
  const last = numberOf(seen[seen.length - 1]!);
  first.ws.terminate();
  await mine(node, 12); // missed while away
  // Several clients resume at once (spread over both workers), while blocks keep coming during their replay.
  const clients = await Promise.all(Array.from({ length: 6 }, () => openSubscriber(t, url)));
  let mining = true;
  const miner = (async () => {
    while (mining) {
      await mine(node);
      await new Promise((r) => setTimeout(r, 15));
    }
  })();
  const ids = await Promise.all(clients.map((c) => c.subscribe('newHeads', { fromBlock: hex(last + 1) })));
  await new Promise((r) => setTimeout(r, 200));
  mining = false;
  await miner;
  await mine(node, 2);
  const head = await blockNumber(node);
  const hashes = await canonicalHashes(node, last + 1, head);
  for (const [i, c] of clients.entries()) {
    const got = await headsUpTo(c, ids[i]!, head);
    t.same(
      got.map(numberOf),
      Array.from({ length: head - last }, (_, k) => last + 1 + k),
      `client ${i}: every block from ${last + 1} to ${head} once, in order`,
    );
    t.same(
      got.map((r) => r.hash),
      hashes,
      `client ${i}: the chain's own heads`,
    );
  }
});

t.test('newHeads: a resume point past subscriptions.replay_blocks is refused naming it; logs past it are fetched', async (t) => {
  const { node, url } = await devnet(t, { subscriptions: { replay_blocks: 8 } });
  await emitEcho(node, 1);
  const logBlock = await blockNumber(node);
  await mine(node, 20);
  const s = await openSubscriber(t, url);
  const refused = await s.request('eth_subscribe', ['newHeads', { fromBlock: hex(logBlock) }]);
  t.equal(refused.error?.code, -32602, 'invalid params');
  t.match(refused.error?.message, /subscriptions\.replay_blocks/, 'the message names the bound');
  t.match(refused.error?.message, /8 blocks/, 'and its value');
  const bad = await s.request('eth_subscribe', ['newHeads', { fromBlock: 'earliest' }]);
  t.equal(bad.error?.code, -32602, 'a tag other than latest is no resume point');
  const head = await blockNumber(node);
  const ok = await s.subscribe('newHeads', { fromBlock: hex(head - 7) });
  t.same(
    (await headsUpTo(s, ok, head)).map(numberOf),
    [head - 7, head - 6, head - 5, head - 4, head - 3, head - 2, head - 1, head],
    'at the bound: 8 heads',
  );
  const logs = await s.subscribe('logs', { ...ECHO_FILTER, fromBlock: hex(logBlock) });
  await waitUntil(() => s.resultsOf(logs).length >= 1, 20_000, 'the old log');
  t.equal(parseInt(s.resultsOf(logs)[0]!.blockNumber as string, 16), logBlock, 'a log older than the bound, fetched with eth_getLogs');
});

t.test('logs resume from the filter fromBlock: missed logs, then live ones, in order, none twice (ws, workers: 2)', async (t) => {
  const { node, url } = await devnet(t);
  const first = await openSubscriber(t, url);
  const id = await first.subscribe('logs', ECHO_FILTER);
  await emitEcho(node, 1);
  await waitUntil(() => first.resultsOf(id).length === 1, 20_000, 'the first log');
  const lastBlock = parseInt(first.resultsOf(id)[0]!.blockNumber as string, 16);
  first.ws.terminate();
  for (let i = 2; i <= 6; i++) await emitEcho(node, i); // missed while away
  const clients = await Promise.all(Array.from({ length: 4 }, () => openSubscriber(t, url)));
  let n = 6;
  let emitting = true;
  const emitter = (async () => {
    while (emitting) await emitEcho(node, ++n);
  })();
  const ids = await Promise.all(clients.map((c) => c.subscribe('logs', { ...ECHO_FILTER, fromBlock: hex(lastBlock + 1) })));
  await new Promise((r) => setTimeout(r, 200));
  emitting = false;
  await emitter;
  await emitEcho(node, ++n);
  const expected = (
    await nodeCall<Array<Record<string, unknown>>>(node.url, 'eth_getLogs', [{ ...ECHO_FILTER, fromBlock: hex(lastBlock + 1) }])
  ).map(logKey);
  t.equal(expected.length, n - 1, 'every log after the first is on the chain');
  for (const [i, c] of clients.entries()) {
    await waitUntil(
      () => c.resultsOf(ids[i]!).length >= expected.length,
      20_000,
      `client ${i}: every log`,
      () => String(c.resultsOf(ids[i]!).length),
    );
    await new Promise((r) => setTimeout(r, 100));
    t.same(c.resultsOf(ids[i]!).map(logKey), expected, `client ${i}: every log from block ${lastBlock + 1} once, in order`);
  }
});

t.test('a reorg while away is replayed as the chain now is', async (t) => {
  const { node, url } = await devnet(t);
  const watcher = await openSubscriber(t, url); // keeps the gateway's memory of heads going while the client is away
  const w = await watcher.subscribe('newHeads');
  await mine(node, 2);
  const from = await blockNumber(node);
  const snapshot = await nodeCall<string>(node.url, 'evm_snapshot');
  await mine(node, 4);
  await headsUpTo(watcher, w, from + 4);
  const before = await canonicalHashes(node, from + 1, from + 4);
  // The blocks above `from` are replaced: the new branch mines with another timestamp, so other hashes.
  await nodeCall(node.url, 'evm_revert', [snapshot]);
  await nodeCall(node.url, 'evm_setNextBlockTimestamp', [hex(Math.floor(Date.now() / 1000) + 1000)]);
  await mine(node, 5);
  const head = from + 5;
  await headsUpTo(watcher, w, head);
  const now = await canonicalHashes(node, from + 1, head);
  t.not(now[0], before[0], 'the branch changed');
  const s = await openSubscriber(t, url);
  const id = await s.subscribe('newHeads', { fromBlock: hex(from + 1) });
  const got = await headsUpTo(s, id, head);
  t.same(got.map(numberOf), [from + 1, from + 2, from + 3, from + 4, from + 5], 'each number once');
  t.same(
    got.map((r) => r.hash),
    now,
    'the heads of the chain as it now is',
  );
});

t.test('each replayed notification is charged as a live one', async (t) => {
  const { node, g } = await devnet(t);
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner(`o${Math.random()}`, 'growth', 1_000_000);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, 'devnet', 'subs', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  await mine(node, 10);
  const head = await blockNumber(node);
  const s = await openSubscriber(t, wsUrl(g.base, `/v1/rpc/${made.apiKey}`));
  const ledger = g.gateway.context.tenancy.ledger;
  const balance = (): number => {
    ledger.flush();
    return ledger.available(owner.id);
  };
  const start = 1_000_000;
  const id = await s.subscribe('newHeads', { fromBlock: hex(head - 4) });
  await headsUpTo(s, id, head);
  const notes = s.notifications.filter((x) => x.subscription === id);
  const ru = notes.reduce((sum, x) => sum + 5 * Math.ceil(x.bytes / 250), 0);
  await waitUntil(
    () => start - balance() >= 10 + ru,
    10_000,
    'the RU debited',
    () => `${start - balance()} of ${10 + ru}`,
  );
  t.equal(start - balance(), 10 + ru, 'eth_subscribe (10 RU) and each of the 5 replayed heads at the notification price');
});
