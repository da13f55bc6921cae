/**
 * sharedCall on a chain with consistency.rewrite_tags (issue 32 §2, proxyd's mode), over a real anvil behind a
 * counting proxy: `latest`, an omitted block and a log filter's omitted ends reach the node as the served head's
 * number, and from then on the call is the call at that number: its cache key and its sharing in flight are
 * those of what was forwarded. Without the key, tags go as they came.
 */
import { waitFor } from '../support/wait-for.js';
import t, { type Test } from 'tap';
import type { ServedHead } from '../../src/chain/served-head.js';
import { methodRow } from '../../src/jsonrpc/methods.js';
import type { Forward } from '../../src/pipeline/plan.js';
import { sharedCall } from '../../src/pipeline/shared-call.js';
import { countingProxy } from '../support/counting-proxy.js';
import { DEV_ADDRESS, result } from '../support/dev-chain.js';
import { anvilFor } from '../support/gateway.js';
import { pipelineContext, type PipelineSetup } from '../support/pipeline-context.js';

/** One forwarded call as the pipeline makes it; resolves with the whole answer's body. */
function ask(s: PipelineSetup, method: string, params: unknown[], idText = '1'): Promise<string> {
  const f: Forward = {
    method,
    row: methodRow(method)!,
    params,
    paramsJson: JSON.stringify(params),
    idText,
    admission: { ok: true, reservation: null, ru: 20, span: undefined },
    watch: null,
  };
  return new Promise((resolve) => {
    sharedCall(s.ctx, s.chain('devnet'), f, {
      whole: (body) => resolve(body.toString()),
      begin() {},
      chunk: () => true,
      end() {},
      fail: (_started, reason) => resolve(`failed: ${reason}`),
    });
  });
}

/**
 * A real anvil at block 10 behind a counting proxy; the chain serves block 6 as its head (a served head below
 * the nodes', as when a majority has not reached their blocks yet), its own head at 10.
 */
async function setup(t: Test, consistency: Record<string, unknown>) {
  // anvil's finalized block is two epochs of 2 slots behind its head: 6, so block 6 is final.
  const node = await anvilFor(t, { args: ['--slots-in-an-epoch', '2'] });
  await result(node.url, 'anvil_mine', ['0xa']);
  const proxy = await countingProxy(t, node.url);
  const s = pipelineContext(t, {
    chains: { devnet: { chain_id: 31337, finality_depth: 3, upstreams: [{ url: proxy.url }], consistency } },
  });
  const chain = s.chain('devnet');
  t.equal(await chain.head.fresh(), 10);
  await waitFor(() => chain.finality.finalized()?.number === 6, { what: "the node's finalized block" });
  (chain as { served: ServedHead }).served = { now: () => 6, watch: () => () => {} };
  return { proxy, s };
}

t.test('rewrite_tags: tags reach the node as the served head, and are keyed and shared as such', async (t) => {
  const { proxy, s } = await setup(t, { rewrite_tags: true });
  const balance = await ask(s, 'eth_getBalance', [DEV_ADDRESS, 'latest']);
  t.equal(proxy.count('eth_getBalance', [DEV_ADDRESS, '0x6']), 1, 'latest went as 0x6');
  t.equal(proxy.count('eth_getBalance', [DEV_ADDRESS, 'latest']), 0);
  t.match(balance, /"result":"0x/);
  await ask(s, 'eth_getTransactionCount', [DEV_ADDRESS]);
  t.equal(proxy.count('eth_getTransactionCount', [DEV_ADDRESS, '0x6']), 1, 'an omitted block went as 0x6');
  await ask(s, 'eth_getLogs', [{ address: DEV_ADDRESS }]);
  t.equal(proxy.count('eth_getLogs', [{ address: DEV_ADDRESS, fromBlock: '0x6', toBlock: '0x6' }]), 1, "a filter's omitted ends too");

  const block = await ask(s, 'eth_getBlockByNumber', ['latest', false]);
  t.match(block, /"number":"0x6"/, 'latest is the served block');
  t.equal(proxy.count('eth_getBlockByNumber', ['0x6', false]), 1);
  t.equal(await ask(s, 'eth_getBlockByNumber', ['0x6', false]), block, 'block 6 is final (the finalized block): kept under its number');
  t.equal(await ask(s, 'eth_getBlockByNumber', ['latest', false]), block, 'and latest, still 6, is answered from there');
  t.equal(proxy.count('eth_getBlockByNumber', ['0x6', false]), 1, 'the node was asked once');
  t.equal(proxy.count('eth_getBlockByNumber', ['latest', false]), 0, 'and never at latest');

  proxy.delay((call) => (call.method === 'eth_getCode' ? 100 : undefined));
  const both = await Promise.all([ask(s, 'eth_getCode', [DEV_ADDRESS, 'latest'], '1'), ask(s, 'eth_getCode', [DEV_ADDRESS, '0x6'], '2')]);
  t.equal(proxy.count('eth_getCode'), 1, 'a call at latest and one at 0x6 in flight share one node call');
  t.same(
    both.map((b) => b.replace(/"id":\d+/, '"id":0')),
    [both[0]!.replace(/"id":\d+/, '"id":0'), both[0]!.replace(/"id":\d+/, '"id":0')],
  );
});

t.test('without rewrite_tags (and no beacon chain named) tags go as they came', async (t) => {
  const { proxy, s } = await setup(t, {});
  await ask(s, 'eth_getBalance', [DEV_ADDRESS, 'latest']);
  t.equal(proxy.count('eth_getBalance', [DEV_ADDRESS, 'latest']), 1);
  await ask(s, 'eth_getBlockByNumber', ['latest', false]);
  t.equal(proxy.count('eth_getBlockByNumber', ['latest', false]), 1);
});
