/**
 * What each upstream declares it serves, end to end: two anvils behind counting proxies, one marked
 * `archive: true`, each with a `methods.deny` list. A call reaches only a node that serves its method (none
 * in rotation that does: the upstream error), and a state read about a block older than
 * state_history_blocks reaches the archive node only, by number or by hash; a recent one may go to either.
 */
import t, { type Test } from 'tap';
import { countingProxy } from '../support/counting-proxy.js';
import { DEV_ADDRESS, result as direct } from '../support/dev-chain.js';
import { anvilFor, gatewayFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';

const HEAD = 20;
const STATE_HISTORY = 8;
const hex = (n: number): string => `0x${n.toString(16)}`;

const [archiveNode, fullNode] = await Promise.all([anvilFor(t, { chainId: 31337 }), anvilFor(t, { chainId: 31337 })]);
await Promise.all([direct(archiveNode.url, 'anvil_mine', [hex(HEAD)]), direct(fullNode.url, 'anvil_mine', [hex(HEAD)])]);
const archive = await countingProxy(t, archiveNode.url);
const full = await countingProxy(t, fullNode.url);
const g = await gatewayFor(t, {
  // One thread, so the chain the test looks at is the one serving its calls.
  server: { workers: 1 },
  chains: {
    devnet: {
      chain_id: 31337,
      state_history_blocks: STATE_HISTORY,
      upstreams: [
        { url: archive.url, name: 'archive', archive: true, methods: { deny: ['eth_getBlockReceipts'] } },
        { url: full.url, name: 'full', methods: { deny: ['eth_getLogs', 'eth_getBlockReceipts'] } },
      ],
    },
  },
});
const url = `${g.base}/v1/rpc/public`;
const chain = g.gateway.context.chains.get('devnet')!;

/** Calls `method` `n` times with params from `paramsOf`, each answered as the archive node answers it directly. */
async function callEach(t: Test, n: number, method: string, paramsOf: (i: number) => unknown[]): Promise<void> {
  for (let i = 0; i < n; i++) {
    const params = paramsOf(i);
    const answer = (await rpc(url, method, params)).json as { result?: unknown };
    t.same(answer.result, await direct(archiveNode.url, method, params), `${method} ${JSON.stringify(params)}`);
  }
}

const counts = (method: string): { archive: number; full: number } => ({ archive: archive.count(method), full: full.count(method) });

t.test('a call goes only to a node that serves its method', async (t) => {
  await callEach(t, 6, 'eth_getLogs', (i) => [{ fromBlock: hex(i), toBlock: 'latest' }]);
  t.same(counts('eth_getLogs'), { archive: 6, full: 0 }, 'the full node denies eth_getLogs and never gets one');
  const none = await rpc(url, 'eth_getBlockReceipts', ['0x1']);
  t.equal(none.status, 502, 'no node in rotation serves it: the upstream error');
  t.equal(none.text, '{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Upstream node error"}}');
  t.same(counts('eth_getBlockReceipts'), { archive: 0, full: 0 });
});

t.test('a state read about an old block reaches the archive node only; a recent one either', async (t) => {
  await waitFor(() => chain.head.now() === HEAD, { what: 'the gateway to know the head', ms: 10_000 });
  t.equal(chain.head.now(), HEAD, 'the gateway knows the head');
  const oldest = HEAD - STATE_HISTORY - 1;
  await callEach(t, 4, 'eth_getBalance', (i) => [DEV_ADDRESS, hex(oldest - i)]);
  await callEach(t, 2, 'eth_getTransactionCount', () => [DEV_ADDRESS, 'earliest']);
  await callEach(t, 2, 'eth_call', () => [{ to: DEV_ADDRESS, data: '0x' }, { blockNumber: '0x1' }]);
  const { hash } = await direct<{ hash: string }>(archiveNode.url, 'eth_getBlockByNumber', ['0x1', false]);
  await callEach(t, 4, 'eth_getCode', () => [DEV_ADDRESS, { blockHash: hash }]);
  t.same(counts('eth_getBalance'), { archive: 4, full: 0 }, `blocks below head - ${STATE_HISTORY}`);
  t.same(counts('eth_getTransactionCount'), { archive: 2, full: 0 }, 'earliest');
  t.same(counts('eth_call'), { archive: 2, full: 0 }, 'an EIP-1898 block number');
  t.same(counts('eth_getCode'), { archive: 4, full: 0 }, 'a block hash whose number the gateway does not know');

  const recent = 30;
  for (let i = 0; i < recent; i++) {
    const params = [DEV_ADDRESS, i % 2 === 0 ? 'latest' : hex(HEAD - STATE_HISTORY)];
    t.equal((await rpc(url, 'eth_getBalance', params)).status, 200);
  }
  const after = counts('eth_getBalance');
  t.equal(after.archive + after.full, 4 + recent, `recent reads go to either node (archive ${after.archive - 4}, full ${after.full})`);
});
