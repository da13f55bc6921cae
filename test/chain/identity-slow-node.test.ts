/**
 * The chain identity check beside the prober's head reads, against a real anvil behind a proxy that holds
 * answers back: a node slow to answer (each call in 1.4 s, under the 2.5 s probe timeout) keeps its place in
 * rotation while its chain id is checked, at start and again, and comes back after failing; a failing node
 * that comes back on another chain is judged before its head can restore it.
 */
import t from 'tap';
import { chainOver, tick } from '../support/chain.js';
import { countingProxy } from '../support/counting-proxy.js';
import { anvilFor } from '../support/gateway.js';
import { waitFor } from '../support/wait-for.js';

const SLOW_MS = 1_400;

t.test('a node answering every call in 1.4 s stays in rotation while its chain is checked, and comes back', async (t) => {
  const anvil = await anvilFor(t);
  const proxy = await countingProxy(t, anvil.url);
  proxy.delay(() => SLOW_MS);
  // Checked again every 2 s, so the watch below sees checks of a node in rotation as well as the first one.
  const chain = chainOver(t, [proxy.url], { identityRecheckMs: 2_000 });
  const node = chain.health.upstreams[0]!;
  chain.startHealthChecks();

  let outAt: number | null = null;
  const started = Date.now();
  while (Date.now() - started < 9_000 && outAt === null) {
    if (!chain.health.healthyIndices().includes(0)) outAt = Date.now() - started;
    await tick(50);
  }
  t.equal(outAt, null, 'never out of rotation in 9 s');
  t.equal(chain.identity.served(0), '31337', 'its chain id was read');
  t.ok(proxy.count('eth_chainId') >= 2, `checked at start and again (${proxy.count('eth_chainId')} checks)`);
  t.ok(node.head !== null, 'its head was read');

  // Out for failing (three failed calls), it comes back at a probe, as slow as before.
  for (let k = 0; k < 3; k++) node.record('failed', 1);
  t.equal(node.failing, true);
  const failedAt = Date.now();
  await waitFor(() => !node.failing, { what: 'back in rotation', ms: 10_000 });
  t.ok(Date.now() - failedAt < 7_000, `back within two probe rounds (${Date.now() - failedAt} ms)`);
});

t.test('a failing node back on another chain is judged before its head restores it', async (t) => {
  const anvil = await anvilFor(t, { chainId: 1 });
  const proxy = await countingProxy(t, anvil.url);
  // Seen as chain 31337 (the configured one) at first, through the proxy.
  proxy.answer((c) => (c.method === 'eth_chainId' ? '0x7a69' : undefined));
  const chain = chainOver(t, [proxy.url]);
  const node = chain.health.upstreams[0]!;
  chain.startHealthChecks();
  await waitFor(() => chain.identity.served(0) === '31337' && node.head !== null, { what: 'checked, head read', ms: 5_000 });

  // It fails, and comes back as the chain-1 node behind the proxy: its chain id slow, its head at once.
  proxy.answer(null);
  proxy.delay((c) => (c.method === 'eth_chainId' ? SLOW_MS : undefined));
  for (let k = 0; k < 3; k++) node.record('failed', 1);
  let seenIn = false;
  const started = Date.now();
  while (Date.now() - started < 6_000 && node.status().reason !== 'wrong_chain') {
    seenIn ||= chain.health.healthyIndices().includes(0);
    await tick(10);
  }
  t.equal(node.status().reason, 'wrong_chain', 'out for serving chain 1');
  t.equal(seenIn, false, 'never back in rotation on the way');
});
