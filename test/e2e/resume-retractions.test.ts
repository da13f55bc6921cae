/**
 * A resumed logs subscription retracts what a reorg replaced while the client was away
 * (docs/websocket.md#resuming-after-a-drop), end to end through a gateway with two worker threads in front of a
 * real anvil: a client receives logs in blocks N..N+3 and goes; anvil reverts to N and mines another branch; the
 * client resumes from N+1 and gets the old branch's logs with `removed: true`, then the new branch's, once each,
 * in order, then the live ones. Whether the filter kept another subscriber meanwhile (its feed live through the
 * reorg) or none (its feed gone, its memory kept for subscriptions.retract_grace_s).
 */
import t, { type Test } from 'tap';
import type { AnvilNode } from '../../src/devnet/anvil.js';
import { ECHO_TOPIC, RUNTIME_BYTECODE } from '../support/contract.js';
import { anvilFor, gatewayFor } from '../support/gateway.js';
import { nodeCall, openSubscriber, type Subscriber, waitUntil } from '../support/subscriber.js';
import { wsUrl } from '../support/ws.js';
import { waitFor } from '../support/wait-for.js';

const DEV_ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const ECHO_ADDRESS = '0x00000000000000000000000000000000000ec40e';
const ECHO_FILTER = { address: ECHO_ADDRESS, topics: [ECHO_TOPIC] };

type Log = Record<string, unknown>;
const hex = (n: number): string => `0x${n.toString(16)}`;
const blockOf = (l: Log): number => parseInt(l.blockNumber as string, 16);
const logKey = (l: Log): string => `${blockOf(l)}:${l.blockHash as string}:${l.logIndex as string}:${l.removed === true}`;
const mine = (node: AnvilNode, n = 1): Promise<unknown> => nodeCall(node.url, 'anvil_mine', [hex(n)]);
/** Emits one echo log (`i` its data) and resolves with its block once mined. */
const emitEcho = async (node: AnvilNode, i: number): Promise<number> => {
  const hash = await nodeCall<string>(node.url, 'eth_sendTransaction', [
    { from: DEV_ADDRESS, to: ECHO_ADDRESS, data: `0x${i.toString(16).padStart(8, '0')}`, gas: '0x30000' },
  ]);
  let block = -1;
  await waitFor(
    async () => {
      const receipt = await nodeCall<{ blockNumber: string } | null>(node.url, 'eth_getTransactionReceipt', [hash]);
      if (receipt !== null) block = parseInt(receipt.blockNumber, 16);
      return receipt !== null;
    },
    { what: `echo ${i} mined` },
  );
  return block;
};

async function devnet(t: Test): Promise<{ node: AnvilNode; url: string }> {
  const node = await anvilFor(t, { chainId: 31337 });
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.url.replace('http', 'ws') }] } },
  });
  await nodeCall(node.url, 'anvil_setCode', [ECHO_ADDRESS, RUNTIME_BYTECODE]);
  return { node, url: wsUrl(g.base, '/v1/rpc/public') };
}

/** The logs of `id` once `n` came, and after a pause that would let a duplicate show. */
async function logsOf(s: Subscriber, id: string, n: number, what: string): Promise<Log[]> {
  await waitUntil(
    () => s.resultsOf(id).length >= n,
    20_000,
    what,
    () => s.resultsOf(id).map(logKey).join(' '),
  );
  await new Promise((r) => setTimeout(r, 300));
  return s.resultsOf(id);
}

for (const watched of [false, true]) {
  const how = watched ? 'another subscriber kept the filter live' : 'nobody held the filter meanwhile';
  t.test(`logs resumed across a reorg while away: the old branch retracted, then the new one (${how})`, async (t) => {
    const { node, url } = await devnet(t);
    const watcher = watched ? await openSubscriber(t, url) : null;
    const w = watcher === null ? null : await watcher.subscribe('logs', ECHO_FILTER);
    const client = await openSubscriber(t, url);
    const id = await client.subscribe('logs', ECHO_FILTER);
    const n = await emitEcho(node, 1);
    const snapshot = await nodeCall<string>(node.url, 'evm_snapshot');
    for (let i = 2; i <= 4; i++) await emitEcho(node, i);
    const held = await logsOf(client, id, 4, 'the logs of blocks N..N+3');
    t.same(held.map(blockOf), [n, n + 1, n + 2, n + 3], 'one log in each of N..N+3');
    const old = held.slice(1);
    client.ws.terminate();

    // Another branch from N: a log in N+1 (other data), none in N+2, a log in N+3, an empty N+4.
    await nodeCall(node.url, 'evm_revert', [snapshot]);
    await nodeCall(node.url, 'evm_setNextBlockTimestamp', [hex(Math.floor(Date.now() / 1000) + 1000)]);
    t.equal(await emitEcho(node, 12), n + 1);
    await mine(node);
    t.equal(await emitEcho(node, 13), n + 3);
    await mine(node);
    const now = await nodeCall<Log[]>(node.url, 'eth_getLogs', [{ ...ECHO_FILTER, fromBlock: hex(n + 1), toBlock: 'latest' }]);
    t.same(now.map(blockOf), [n + 1, n + 3], 'the new branch');
    t.not(now[0]!.blockHash, old[0]!.blockHash, 'another block N+1');
    if (watcher !== null) await logsOf(watcher, w!, 6, "the watcher's logs of the new branch");

    // Several clients resume, spread over both workers: each gets the same.
    const resumed = await Promise.all(Array.from({ length: 3 }, () => openSubscriber(t, url)));
    const ids = await Promise.all(resumed.map((c) => c.subscribe('logs', { ...ECHO_FILTER, fromBlock: hex(n + 1) })));
    const expected = [...old.map((l) => logKey({ ...l, removed: true })), ...now.map(logKey)];
    for (const [i, c] of resumed.entries()) {
      const got = await logsOf(c, ids[i]!, expected.length, `client ${i}: the retractions and the new branch`);
      t.same(got.map(logKey), expected, `client ${i}: the old branch's logs removed, in block order, then the new branch's, once each`);
      t.same(
        got.slice(0, 3).map((l) => ({ ...l, removed: false })),
        old,
        `client ${i}: each retraction is the log as delivered, but for removed`,
      );
    }
    const live = await emitEcho(node, 14);
    for (const [i, c] of resumed.entries()) {
      const got = await logsOf(c, ids[i]!, expected.length + 1, `client ${i}: the live log`);
      t.same(got.slice(expected.length).map(blockOf), [live], `client ${i}: then the live one, once`);
    }
  });
}
