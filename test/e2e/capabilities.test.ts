/**
 * archive: auto and methods: auto (docs/failover.md#capabilities-found-out-auto): two anvils on one chain, one
 * behind a relay that answers as a pruned node that serves no debug_ method. The gateway finds that out, shows it
 * in /healthz, and sends old-state reads to the archive node and debug_ calls never to the pruned one.
 */
import t from 'tap';
import { AnswerError, countingProxy } from '../support/counting-proxy.js';
import { gatewayFor } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { RECIPIENT, sameChainAnvils } from '../support/same-chain.js';
import { waitFor } from '../support/wait-for.js';

const ZERO_HASH = `0x${'0'.repeat(64)}`;

interface Health {
  chains: Record<string, { upstreams: Array<{ label: string; archive?: string; methods?: string }> }>;
}

t.test('a pruned node and an archive node are found out; reads and debug_ calls go where they are served', async (t) => {
  const chain = await sameChainAnvils(t, 2);
  await chain.mineTo(0, 8);
  await chain.mineTo(1, 8);
  const [pruned, archive] = await Promise.all([countingProxy(t, chain.nodes[0]!.url), countingProxy(t, chain.nodes[1]!.url)]);
  pruned.answer((c) => {
    if (c.method.startsWith('debug_')) return new AnswerError(-32601, `the method ${c.method} does not exist/is not available`);
    const block = c.params[1];
    if (c.method === 'eth_getBalance' && typeof block === 'string' && block.startsWith('0x') && Number(block) < 5)
      return new AnswerError(-32000, 'missing trie node 5e1f0c... (path ) state 0x... is not available');
    return undefined;
  });
  const g = await gatewayFor(t, {
    public: { rps_per_ip: 10_000_000, max_batch: 1000, methods: { deny: [] } },
    chains: {
      devnet: {
        chain_id: 31337,
        state_history_blocks: 2,
        upstreams: [
          { name: 'pruned', url: pruned.url, archive: 'auto', methods: 'auto' },
          { name: 'archive', url: archive.url, archive: 'auto', methods: 'auto' },
        ],
      },
    },
  });
  const health = async (): Promise<Health> => (await send('GET', `${g.base}/healthz`)).json as Health;
  await waitFor(
    async () => {
      const [p, a] = (await health()).chains.devnet!.upstreams;
      return (
        p?.archive === 'false (auto)' &&
        a?.archive === 'true (auto)' &&
        p?.methods === 'all but debug_* (auto)' &&
        a?.methods === 'all (auto)'
      );
    },
    { what: 'both nodes found out, in /healthz', ms: 10_000 },
  );
  t.ok(
    g.logLines.some((l) => l.includes('upstream capability found') && l.includes('upstream=pruned') && l.includes('archive=false')),
    'the finding is logged',
  );

  const url = `${g.base}/v1/rpc/public`;
  for (let i = 0; i < 20; i++) {
    const r = (await rpc(url, 'eth_getBalance', [RECIPIENT, '0x2'], i)).json as { result?: string; error?: unknown };
    t.equal(r.result, '0x3', `old-state read ${i} answered (block 2 sent 1 + 2 wei)`);
  }
  t.equal(pruned.count('eth_getBalance', [RECIPIENT, '0x2']), 0, 'no old-state read reached the pruned node');
  t.equal(archive.count('eth_getBalance', [RECIPIENT, '0x2']), 20, 'the archive node took them all');

  const block = (await rpc(url, 'eth_getBlockByNumber', ['0x3', false])).json as { result: { transactions: string[] } };
  const tx = block.result.transactions[0]!;
  for (let i = 0; i < 10; i++) {
    const r = (await rpc(url, 'debug_traceTransaction', [tx], i)).json as { result?: unknown; error?: unknown };
    t.ok(r.result !== undefined, `debug call ${i} answered`);
  }
  const debugAtPruned = pruned.calls.filter((c) => c.method.startsWith('debug_') && c.params[0] !== ZERO_HASH);
  t.equal(debugAtPruned.length, 0, 'no debug_ call reached the pruned node');
  t.equal(pruned.count('debug_traceTransaction', [ZERO_HASH]) > 0, true, 'it was asked the probe only');
  // Recent reads still go to both: until one reaches the pruned node, bounded in time (a `latest` read goes only
  // to a node whose head is known, and on a loaded machine a probe may come late; the draw is random).
  const until = Date.now() + 15_000;
  for (let i = 0; pruned.count('eth_getBalance', [RECIPIENT, 'latest']) === 0 && Date.now() < until; i++)
    await rpc(url, 'eth_getBalance', [RECIPIENT, 'latest'], i);
  t.ok(pruned.count('eth_getBalance', [RECIPIENT, 'latest']) > 0, 'a recent read may go to the pruned node');
});
