/**
 * consistency.quorum end to end over three anvils on one chain (test/support/same-chain.ts), one of them behind a
 * relay that alters every eth_getBalance answer: a quorum of 2 of 3 always serves the true balance, over HTTP, in a
 * batch and over WebSocket, counts the altered node in chaingate_consensus_mismatches_total, takes it out of
 * rotation after eject_after disagreements until its next good probe, and charges each call once. With agree: 3
 * the altered node leaves no agreement: on_mismatch majority serves the two honest nodes' answer, on_mismatch error
 * answers no_quorum, refunded.
 */
import t, { type Test } from 'tap';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { countingProxy, type CountingProxy } from '../support/counting-proxy.js';
import { result as direct } from '../support/dev-chain.js';
import { scrape } from '../support/exposition.js';
import { gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, rpc } from '../support/rpc.js';
import { RECIPIENT, type SameChain, sameChainAnvils } from '../support/same-chain.js';
import { waitFor } from '../support/wait-for.js';
import { openSocket, wsUrl } from '../support/ws.js';

const HEIGHT = 3;
const PRICE = 7;
const ALTERED = '0xdead';

interface Setup {
  chain: SameChain;
  altered: CountingProxy;
  honest: CountingProxy[];
  /** RECIPIENT's true balance at HEIGHT. */
  balance: string;
}

/**
 * Three anvils at HEIGHT, each behind a counting proxy: the first answers every eth_getBalance itself with
 * ALTERED, the other two hold theirs 20 ms, so the altered answer is always in before the honest ones agree.
 */
async function nodes(t: Test): Promise<Setup> {
  const chain = await sameChainAnvils(t, 3);
  for (let i = 0; i < 3; i++) await chain.mineTo(i, HEIGHT);
  const altered = await countingProxy(t, chain.nodes[0]!.url);
  altered.answer((c) => (c.method === 'eth_getBalance' ? ALTERED : undefined));
  const honest = [await countingProxy(t, chain.nodes[1]!.url), await countingProxy(t, chain.nodes[2]!.url)];
  for (const h of honest) h.delay((c) => (c.method === 'eth_getBalance' ? 20 : undefined));
  const balance = await direct<string>(chain.nodes[1]!.url, 'eth_getBalance', [RECIPIENT, 'latest']);
  t.equal(await direct<string>(chain.nodes[2]!.url, 'eth_getBalance', [RECIPIENT, 'latest']), balance, 'the honest nodes agree');
  return { chain, altered, honest, balance };
}

async function gatewayOver(t: Test, s: Setup, quorum: Record<string, unknown>): Promise<{ g: TestGateway; url: string; ownerId: number }> {
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    chains: {
      devnet: {
        chain_id: 31337,
        upstreams: [
          { url: s.altered.url, name: 'altered' },
          { url: s.honest[0]!.url, name: 'honest-1' },
          { url: s.honest[1]!.url, name: 'honest-2' },
        ],
        ru: { methods: { eth_getBalance: PRICE } },
        consistency: { quorum: { methods: ['eth_getBalance'], ...quorum } },
      },
    },
  });
  const chain = g.gateway.context.chains.get('devnet')!;
  await waitFor(() => chain.head.now() === HEIGHT, { what: `the gateway to know the head ${HEIGHT}`, ms: 10_000 });
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner(`o${Math.random()}`, 'growth', 1_000_000);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, 'devnet', 'quorum', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  return { g, url: `${g.base}/v1/rpc/${made.apiKey}`, ownerId: owner.id };
}

t.test('quorum 2 of 3: the true balance every time, the altered node counted and taken out, RU charged once', async (t) => {
  const s = await nodes(t);
  const { g, url, ownerId } = await gatewayOver(t, s, { nodes: 3, agree: 2, eject_after: 4 });
  const ledger = g.gateway.context.tenancy.ledger;
  const health = g.gateway.context.chains.get('devnet')!.health;
  const before = ledger.available(ownerId);
  const atTwo = await direct<string>(s.chain.nodes[1]!.url, 'eth_getBalance', [RECIPIENT, '0x2']);

  // A single call, a batch of two and a WebSocket call: four disagreements of the altered node, all outvoted.
  const single = await rpc(url, 'eth_getBalance', [RECIPIENT, 'latest'], 1);
  t.same(single.json, { jsonrpc: '2.0', id: 1, result: s.balance }, 'the honest balance');
  const batch = await post(
    url,
    JSON.stringify([
      { jsonrpc: '2.0', id: 'a', method: 'eth_getBalance', params: [RECIPIENT, 'latest'] },
      { jsonrpc: '2.0', id: 'b', method: 'eth_getBalance', params: [RECIPIENT, '0x2'] },
    ]),
  );
  t.same(
    batch.json,
    [
      { jsonrpc: '2.0', id: 'a', result: s.balance },
      { jsonrpc: '2.0', id: 'b', result: atTwo },
    ],
    'each batch entry agreed on',
  );
  t.equal(health.upstreams[0]!.failing, false, 'three disagreements: still in rotation');
  const ws = await openSocket(t, wsUrl(url, ''));
  t.same(
    await ws.call({ jsonrpc: '2.0', id: 'w', method: 'eth_getBalance', params: [RECIPIENT, 'latest'] }),
    { jsonrpc: '2.0', id: 'w', result: s.balance },
    'over WebSocket',
  );
  t.equal(health.upstreams[0]!.failing, true, 'four in a row: out of rotation');
  ws.ws.close();
  t.equal(s.altered.count('eth_getBalance'), 4, 'the altered node was asked each time');
  t.ok(
    g.logLines.some((l) => /^warn upstream out of rotation until its next good probe.* upstream=altered/.test(l)),
    'the ejection is logged, naming the node',
  );
  t.equal(g.logLines.filter((l) => /^warn a node's answer differs.* method=eth_getBalance upstream=altered/.test(l)).length, 4);

  // Back at its next good probe; asked again, and out again after four more.
  await waitFor(() => !health.upstreams[0]!.failing, { what: 'the altered node back at its next good probe', ms: 10_000 });
  for (let i = 0; i < 4; i++) {
    const r = await rpc(url, 'eth_getBalance', [RECIPIENT, 'latest']);
    t.equal((r.json as { result: string }).result, s.balance);
  }
  t.equal(s.altered.count('eth_getBalance'), 8, 'asked again once back');
  t.equal(health.upstreams[0]!.failing, true, 'and out again');
  t.equal(ledger.available(ownerId), before - 8 * PRICE, `eight calls, ${PRICE} RU each: one charge a call, not one a node`);

  const m = await scrape(g.gateway.metricsPort!);
  const mismatches = m.series('chaingate_consensus_mismatches_total');
  t.same(
    mismatches.map((x) => x.labels),
    [{ chain: 'devnet', method: 'eth_getBalance', upstream: 'altered' }],
    'only the altered node disagreed',
  );
  t.equal(mismatches[0]!.value, 8, 'each of its answers');
  t.equal(m.value('chaingate_consensus_calls_total', { chain: 'devnet', method: 'eth_getBalance', outcome: 'agreed' }), 8);
  t.ok(
    m.value('chaingate_upstream_requests_total', { chain: 'devnet', upstream: 'altered', outcome: 'ok' }) >= 8,
    "the altered node's answers count among its calls",
  );
});

t.test('agree 3 of 3 with one altered node: majority serves the two, error answers no_quorum, refunded', async (t) => {
  const s = await nodes(t);
  const major = await gatewayOver(t, s, { nodes: 3, agree: 3, on_mismatch: 'majority', eject_after: 1000 });
  const served = await rpc(major.url, 'eth_getBalance', [RECIPIENT, 'latest']);
  t.same(served.json, { jsonrpc: '2.0', id: 1, result: s.balance }, 'two honest nodes against one');
  const mm = await scrape(major.g.gateway.metricsPort!);
  t.equal(mm.value('chaingate_consensus_calls_total', { chain: 'devnet', method: 'eth_getBalance', outcome: 'majority' }), 1);
  t.equal(mm.value('chaingate_consensus_mismatches_total', { chain: 'devnet', method: 'eth_getBalance', upstream: 'altered' }), 1);

  const strict = await gatewayOver(t, s, { nodes: 3, agree: 3, on_mismatch: 'error', eject_after: 1000 });
  const ledger = strict.g.gateway.context.tenancy.ledger;
  const before = ledger.available(strict.ownerId);
  const refused = await rpc(strict.url, 'eth_getBalance', [RECIPIENT, 'latest']);
  t.equal(refused.status, 502);
  t.same(refused.json, { jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'Nodes disagreed on the answer' } });
  t.notMatch(refused.text, new RegExp(`${ALTERED}|${s.balance}`), 'the error never says which answers');
  const batch = await post(
    strict.url,
    JSON.stringify([{ jsonrpc: '2.0', id: 'x', method: 'eth_getBalance', params: [RECIPIENT, 'latest'] }]),
  );
  t.equal(batch.status, 502, 'a batch whose every item is no_quorum is a 502');
  t.same(batch.json, [{ jsonrpc: '2.0', id: 'x', error: { code: -32603, message: 'Nodes disagreed on the answer' } }]);
  t.equal(ledger.available(strict.ownerId), before, 'no answer, no charge');
  t.ok(
    strict.g.logLines.some((l) => /calls asked of several nodes get no agreed answer/.test(l)),
    'the condition is logged',
  );
  const sm = await scrape(strict.g.gateway.metricsPort!);
  t.equal(sm.value('chaingate_consensus_calls_total', { chain: 'devnet', method: 'eth_getBalance', outcome: 'disagreed' }), 2);
});
