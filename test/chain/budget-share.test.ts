import t from 'tap';
import { MessageChannel } from 'node:worker_threads';
import { budgetShare } from '../../src/chain/chain-nodes.js';
import { createChainRelayClient, createChainRelayHost } from '../../src/chain/relay.js';
import type { UpstreamConfig } from '../../src/config/schema.js';
import { createChainHealth } from '../../src/upstreams/selection.js';
import { waitFor } from '../support/wait-for.js';

const node = (extra: Partial<UpstreamConfig>): UpstreamConfig => ({ name: 'n', url: 'http://n', tier: 0, ...extra }) as UpstreamConfig;

t.test("each worker gets its share of a node's budget, at least 1", async (t) => {
  t.same(budgetShare(node({ rps: 50, max_in_flight: 10 }), 1), { rps: 50, maxInFlight: 10 });
  t.same(budgetShare(node({ rps: 50, max_in_flight: 10 }), 2), { rps: 25, maxInFlight: 5 });
  t.same(budgetShare(node({ rps: 50 }), 3), { rps: 16, maxInFlight: null }, 'rounded down: the process stays under');
  t.same(budgetShare(node({ rps: 1 }), 4), { rps: 1, maxInFlight: null });
  t.same(budgetShare(node({}), 2), { rps: null, maxInFlight: null });
});

t.test("a worker's cooldown reaches every other worker through the main thread", async (t) => {
  const host = createChainRelayHost(() => undefined);
  const clock = { now: 0 };
  const workers = [0, 1].map(() => {
    const channel = new MessageChannel();
    host.attach(channel.port1);
    const client = createChainRelayClient(channel.port2);
    t.teardown(() => {
      client.close();
      channel.port1.close();
    });
    const health = createChainHealth(['a', 'b'], { maxLagBlocks: 5, now: () => clock.now, tiers: [0, 1] });
    client.follow('dev', health);
    return health;
  });
  t.equal(workers[1]!.pick(), 0);
  workers[0]!.coolDown(0, 1_000);
  t.equal(workers[0]!.pick(), 1, 'the worker that got the 429');
  await waitFor(() => workers[1]!.pick() === 1, { what: 'the other worker to hear of the cooldown' });
  clock.now = 1_000;
  t.equal(workers[1]!.pick(), 0, 'and to end it when it ends');
  t.equal(workers[0]!.pick(), 0);
});
