/**
 * What feeds a chain's filters: the upstream subscriptions while they hold, and, once one is lost, the block
 * poll in its stead (the lost feed is not asked again while its filters live), over stand-in feeds.
 */
import t from 'tap';
import { createChainFilters, type FilterSources } from '../../src/chain/filters.js';
import type { FeedListener } from '../../src/fanout/feeds.js';

/** A chain whose feeds record every subscription, and whose nodes cannot be reached (the block poll fails quietly). */
function standInChain() {
  const listeners = new Map<string, FeedListener>();
  const subscribed: string[] = [];
  const removed: string[] = [];
  const chain = {
    head: { now: () => 5, fresh: async () => 5, note() {} },
    feeds: {
      subscribe(kind: string, _params: unknown, listener: FeedListener) {
        subscribed.push(kind);
        listeners.set(kind, listener);
        return { remove: () => removed.push(kind) };
      },
    },
    timeoutMs: 1000,
    upstreams: [],
    pickUpstream: () => {
      throw new Error('no node in this test');
    },
  } as unknown as FilterSources;
  return { chain, listeners, subscribed, removed };
}

t.test('a lost feed gives way to the block poll and is not asked again while its filters live', async (t) => {
  const { chain, listeners, subscribed, removed } = standInChain();
  const logged: string[] = [];
  const filters = createChainFilters(chain, {
    maxPerKey: 10,
    idleTimeoutMs: 60_000,
    log: (level, msg, fields) => logged.push(`${level}: ${msg} (${String(fields?.reason)})`),
  });
  t.teardown(() => filters.close());

  const pending = await filters.call('ip:a', 'eth_newPendingTransactionFilter', []);
  t.same(subscribed, ['newPendingTransactions'], 'a pending filter opens the pending subscription');
  t.equal(filters.takesSentTransactions(), false, 'which feeds it: sent transactions are not its news');

  listeners.get('newPendingTransactions')!.lost('link closed');
  t.same(logged, ["warn: the filters' pending transaction subscription was lost; polling blocks instead (link closed)"]);
  t.equal(filters.takesSentTransactions(), true, 'once lost, the transactions sent through the gateway are');
  filters.notePendingTransaction('0xaa');
  t.same(await filters.call('ip:a', 'eth_getFilterChanges', [pending]), ['0xaa'], 'and reach the filter');

  await filters.call('ip:a', 'eth_newBlockFilter', []);
  t.same(subscribed, ['newPendingTransactions', 'newHeads'], 'a block filter opens the heads feed; the lost one is not asked again');
  listeners.get('newHeads')!.notify('{"number":"0x6","hash":"0x06"}');

  t.equal(await filters.call('ip:a', 'eth_uninstallFilter', [pending]), true);
  t.same(removed, [], 'the lost feed has nothing to remove');
  filters.close();
  t.same(removed, ['newHeads'], 'closing removes the heads subscription');
});
