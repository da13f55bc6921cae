/**
 * Transactions watched (config `transactions`), through a gateway of two worker threads (run `npm run build` first:
 * workers run dist/), with viem and ws as clients, on a real anvil that mines only when told: a transaction sent
 * through the gateway and then dropped from anvil's pool (anvil_dropTransaction) is sent again within a few heads
 * and included, its status read with chaingate_getTransactionStatus (free of RU) and streamed to a
 * `transactionStatus` subscription; one replaced by another of its sender and nonce is told so, with the
 * replacing hash; and the keyless path's are not watched unless the operator says so.
 */
import t, { type Test } from 'tap';
import { createPublicClient, createWalletClient, type Hex, parseGwei, webSocket } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { anvil } from 'viem/chains';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { result } from '../support/dev-chain.js';
import { rpc } from '../support/rpc.js';
import { anvilFor, gatewayFor, type TestGateway } from '../support/gateway.js';
import { openSubscriber, type Subscriber } from '../support/subscriber.js';
import { wsUrl } from '../support/ws.js';
import { waitFor } from '../support/wait-for.js';

// anvil's first well-known development account, and its second's address as the recipient.
const DEV_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const TO = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
/** Heads until a watched transaction in no pool is sent again (RESEND_EVERY_BLOCKS), with room to spare. */
const MOST_HEADS = 10;

async function stack(t: Test, workers: number, transactions: Record<string, unknown> = { watch_keyless: true }) {
  const node = await anvilFor(t, { args: ['--no-mining'] });
  const g = await gatewayFor(
    t,
    {
      server: { default_chain: 'devnet', workers },
      transactions,
      chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.url.replace(/^http/, 'ws') }] } },
    },
    { prober: { intervalMs: 100 } },
  );
  const url = wsUrl(g.base, '/v1/rpc/public');
  const transport = webSocket(url);
  const client = createPublicClient({ chain: anvil, transport });
  const wallet = createWalletClient({ account: privateKeyToAccount(DEV_KEY), chain: anvil, transport });
  t.teardown(() => client.transport.getRpcClient().then((c) => c.close()));
  const ws = await openSubscriber(t, url);
  return { node, g, client, wallet, ws };
}

/** A transfer signed by the dev account at `nonce`, with `tip` gwei of priority fee. */
async function signed(wallet: Awaited<ReturnType<typeof stack>>['wallet'], nonce: number, tip: number): Promise<Hex> {
  return wallet.signTransaction({
    to: TO,
    value: 1n,
    nonce,
    gas: 21_000n,
    maxFeePerGas: parseGwei('100'),
    maxPriorityFeePerGas: parseGwei(String(tip)),
  });
}

/** Mines one block at anvil and waits until the gateway serves it (the watch looks on each served head). */
async function mineOne(anvilUrl: string, g: TestGateway): Promise<number> {
  await result(anvilUrl, 'evm_mine');
  const head = Number(await result<string>(anvilUrl, 'eth_blockNumber'));
  const served = g.gateway.context.chains.get('devnet')!.served;
  await waitFor(() => (served.now() ?? -1) >= head, { what: `the gateway serving head ${head}` });
  return head;
}

async function status(ws: Subscriber, hash: string): Promise<unknown> {
  const a = await ws.request('chaingate_getTransactionStatus', [hash]);
  if (a.error !== undefined) throw new Error(`chaingate_getTransactionStatus refused: ${JSON.stringify(a.error)}`);
  return a.result;
}

t.test('dropped from the pool: sent again within a few heads, then included; ws and viem see it', async (t) => {
  const { node, g, client, wallet, ws } = await stack(t, 2);
  t.equal(g.gateway.workers?.count, 2);
  const hash = await client.sendRawTransaction({ serializedTransaction: await signed(wallet, 0, 1) });
  const sub = await ws.subscribe('transactionStatus', hash);
  t.same(await status(ws, hash), { status: 'pending', hash }, 'pending once accepted');

  await result(node.url, 'anvil_dropTransaction', [hash]);
  t.equal(await result(node.url, 'eth_getTransactionByHash', [hash]), null, 'anvil forgot it');
  let heads = 0;
  while ((await result(node.url, 'eth_getTransactionByHash', [hash])) === null) {
    if (++heads > MOST_HEADS) throw new Error(`not sent again within ${MOST_HEADS} heads`);
    await mineOne(node.url, g);
    // The look at this head may still be under way: a short wait for its send, else the next head.
    await waitFor(async () => (await result(node.url, 'eth_getTransactionByHash', [hash])) !== null, { ms: 1000 }).catch(() => {});
  }
  t.ok(heads <= MOST_HEADS, `sent again after ${heads} heads`);
  t.ok(
    g.logLines.some((l) => l.includes('a watched transaction is in no pool: sent again')),
    'the gateway logged the send',
  );

  const included = await mineOne(node.url, g);
  await waitFor(() => ws.resultsOf(sub).some((r) => r.status === 'included'), { what: 'an included notification' });
  const receipt = await result<{ blockNumber: string; blockHash: string }>(node.url, 'eth_getTransactionReceipt', [hash]);
  t.equal(Number(receipt.blockNumber), included, 'anvil included it in the block mined after the send');
  const want = { status: 'included', hash, blockNumber: receipt.blockNumber, blockHash: receipt.blockHash };
  t.same(ws.resultsOf(sub).at(-1), want, 'the subscription told it, with its block');
  t.same(await client.request({ method: 'chaingate_getTransactionStatus' as never, params: [hash] as never }), want, 'viem reads it too');
});

t.test('replaced by another transaction of its sender and nonce: told, with the replacing hash', async (t) => {
  const { node, g, client, wallet, ws } = await stack(t, 2);
  const hash = await client.sendRawTransaction({ serializedTransaction: await signed(wallet, 0, 1) });
  const sub = await ws.subscribe('transactionStatus', hash);
  await result(node.url, 'anvil_dropTransaction', [hash]);
  // The replacement goes to anvil directly: the gateway never saw it.
  const other = await result<string>(node.url, 'eth_sendRawTransaction', [await signed(wallet, 0, 2)]);
  t.not(other, hash);
  for (let heads = 0; !ws.resultsOf(sub).some((r) => r.status === 'replaced'); heads++) {
    if (heads > MOST_HEADS) throw new Error(`not told replaced within ${MOST_HEADS} heads`);
    await mineOne(node.url, g);
    await waitFor(() => ws.resultsOf(sub).length > 0, { ms: 1000 }).catch(() => {});
  }
  t.same(ws.resultsOf(sub).at(-1), { status: 'replaced', hash, replacedBy: other }, 'replaced, by the hash that was included');
  t.same(await status(ws, hash), { status: 'replaced', hash, replacedBy: other });
});

t.test('the keyless path is not watched unless transactions.watch_keyless', async (t) => {
  const { client, wallet, ws } = await stack(t, 1, {});
  const hash = await client.sendRawTransaction({ serializedTransaction: await signed(wallet, 0, 1) });
  t.equal(await status(ws, hash), null, 'not watched: null');
});

t.test("a key's transactions are watched; the status read is free: answered at a zero balance", async (t) => {
  const { g, wallet } = await stack(t, 2, {});
  // Exactly the price of one eth_sendRawTransaction (200 RU): nothing is left after it.
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('watcher', 'growth', 200);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, 'devnet', 'watch', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  const url = `${g.base}/v1/rpc/${made.apiKey}`;
  const sent = (await rpc(url, 'eth_sendRawTransaction', [await signed(wallet, 0, 1)])).json as { result: string };
  const hash = sent.result;
  t.match(hash, /^0x[0-9a-f]{64}$/, 'accepted');
  for (let i = 0; i < 3; i++) {
    const read = (await rpc(url, 'chaingate_getTransactionStatus', [hash])).json;
    t.same(read, { jsonrpc: '2.0', id: (read as { id: unknown }).id, result: { status: 'pending', hash } }, `read ${i + 1} answered`);
  }
  const broke = (await rpc(url, 'eth_blockNumber', [])).json as { error?: { code: number } };
  t.ok(broke.error !== undefined, 'a priced call is refused: the balance is spent');
});
