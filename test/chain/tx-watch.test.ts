/**
 * The watch of sent transactions with its chain stood in for (heads told by the test, node answers scripted):
 * bounds per key and in all with the oldest going first, a status read and its subscription, expiry as
 * `dropped`, inclusion from the receipt, and the filters' road (withTxWatch) that workers use.
 */
import t from 'tap';
import { createTxWatch, STATUS_CALL, WATCH_CALL, withTxWatch } from '../../src/chain/tx-watch.js';
import type { ChainFilters } from '../../src/chain/filters.js';
import { waitFor } from '../support/wait-for.js';
import type { HttpUpstream, RequestHandle, ResponseSink, UpstreamRequest } from '../../src/upstreams/http-client.js';
import { createChainHealth } from '../../src/upstreams/selection.js';

const hashOf = (n: number): string => `0x${n.toString(16).padStart(64, '0')}`;

function fakeChain(receipts: Map<string, { blockNumber: string; blockHash: string }> = new Map()) {
  let head = 1;
  const listeners = new Set<(h: number) => void>();
  const chain = {
    served: {
      now: () => head,
      watch: (l: (h: number) => void) => {
        listeners.add(l);
        return () => listeners.delete(l);
      },
    },
    async call(method: string, params: unknown[]) {
      if (method === 'eth_getTransactionReceipt') return receipts.get(params[0] as string) ?? null;
      throw new Error(`unexpected ${method}`);
    },
    upstreams: [],
    health: { healthyIndices: () => [] },
    timeoutMs: 1000,
  };
  const advance = (to: number): void => {
    head = to;
    for (const l of listeners) l(head);
  };
  return { chain: chain as never, advance };
}

const noLog = (): void => {};

t.test('bounded per key and in all, the oldest going first', async (t) => {
  const { chain } = fakeChain();
  const w = createTxWatch(chain, { watch_blocks: 50, max_watched: 3, max_watched_per_key: 2 }, noLog);
  t.teardown(() => w.close());
  w.watch('ep:a', '0x01', hashOf(1));
  w.watch('ep:a', '0x02', hashOf(2));
  w.watch('ep:a', '0x03', hashOf(3));
  t.equal(w.status(hashOf(1)), null, "the key's oldest went");
  t.same(w.status(hashOf(2)), { status: 'pending', hash: hashOf(2) });
  w.watch('ep:b', '0x04', hashOf(4));
  w.watch('ep:b', '0x05', hashOf(5));
  t.equal(w.status(hashOf(2)), null, 'past max_watched, the oldest of all went');
  t.same(
    [3, 4, 5].map((n) => w.status(hashOf(n))?.status),
    ['pending', 'pending', 'pending'],
  );
  t.equal(w.status(hashOf(9)), null, 'a hash never watched: null');
});

t.test('max_watched_per_key 1 holds the bound past the set its eviction emptied', async (t) => {
  const { chain } = fakeChain();
  const w = createTxWatch(chain, { watch_blocks: 50, max_watched: 10, max_watched_per_key: 1 }, noLog);
  t.teardown(() => w.close());
  w.watch('ep:a', '0x01', hashOf(1));
  w.watch('ep:a', '0x02', hashOf(2));
  t.equal(w.status(hashOf(1)), null, "the key's one slot went to the newer");
  w.watch('ep:a', '0x03', hashOf(3));
  t.equal(w.status(hashOf(2)), null, 'the second eviction still finds the newer in its key');
  w.watch('ep:a', '0x04', hashOf(4));
  t.same(
    [1, 2, 3, 4].map((n) => w.status(hashOf(n))?.status ?? null),
    [null, null, null, 'pending'],
    'one watched for the key',
  );
});

t.test('max_watched 0 watches nothing', async (t) => {
  const { chain } = fakeChain();
  const w = createTxWatch(chain, { watch_blocks: 50, max_watched: 0, max_watched_per_key: 2 }, noLog);
  t.teardown(() => w.close());
  w.watch('ep:a', '0x01', hashOf(1));
  t.equal(w.status(hashOf(1)), null);
});

t.test('included from its receipt, dropped after watch_blocks heads; each change told to subscribers', async (t) => {
  const receipts = new Map<string, { blockNumber: string; blockHash: string }>();
  const { chain, advance } = fakeChain(receipts);
  const w = createTxWatch(chain, { watch_blocks: 2, max_watched: 10, max_watched_per_key: 10 }, noLog);
  t.teardown(() => w.close());
  const told: unknown[] = [];
  const hold = w.subscribe(hashOf(1).toUpperCase().replace('0X', '0x'), { notify: (j) => told.push(JSON.parse(j)), lost() {} });
  t.equal(hold.live(), true);
  w.watch('ep:a', '0x01', hashOf(1));
  w.watch('ep:a', '0x02', hashOf(2));
  t.same(told, [{ status: 'pending', hash: hashOf(1) }], 'told as it is watched');
  advance(2);
  receipts.set(hashOf(1), { blockNumber: '0x3', blockHash: hashOf(33) });
  advance(3);
  await waitFor(() => told.length === 2, { what: 'the inclusion' });
  t.same(told[1], { status: 'included', hash: hashOf(1), blockNumber: '0x3', blockHash: hashOf(33) });
  advance(4);
  await waitFor(() => w.status(hashOf(2))?.status === 'dropped', { what: 'the other dropped after 2 heads' });
  hold.remove();
});

t.test("the filters' road: the watch's two calls answered by it, every other call by the filters", async (t) => {
  const { chain } = fakeChain();
  const w = createTxWatch(chain, { watch_blocks: 50, max_watched: 10, max_watched_per_key: 10 }, noLog);
  const calls: string[] = [];
  const filters: ChainFilters = {
    size: () => 0,
    call: async (_scope, method) => void calls.push(method),
    takesSentTransactions: () => false,
    notePendingTransaction() {},
    close: () => void calls.push('close'),
  };
  const f = withTxWatch(filters, w);
  t.equal(await f.call('ep:a', WATCH_CALL, ['0x01', hashOf(1)]), null);
  t.same(await f.call('ep:a', STATUS_CALL, [hashOf(1)]), { status: 'pending', hash: hashOf(1) });
  await f.call('ep:a', 'eth_newBlockFilter', []);
  f.close();
  t.same(calls, ['eth_newBlockFilter', 'close']);
});

/** A node that holds no transaction and takes any sent to it; `methods` are those it was asked, in order. */
function poolNode(label: string): HttpUpstream & { methods: string[] } {
  const self = {
    label,
    methods: [] as string[],
    request(req: UpstreamRequest, sink: ResponseSink): RequestHandle {
      const call = JSON.parse(String(req.body)) as { id: number; method: string };
      self.methods.push(call.method);
      const result = call.method === 'eth_sendRawTransaction' ? hashOf(1) : null;
      setImmediate(() => {
        const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: call.id, result }));
        sink.onHead(200, [], body.length);
        sink.onData(body);
        sink.onEnd();
      });
      return { abort() {}, resume() {}, distrust() {} };
    },
    stats: () => ({ open: 0, busy: 0, queued: 0 }),
    close() {},
  };
  return self as never;
}

t.test("in no pool: sent again only to the nodes its broadcast would reach, each send counted in the node's health", async (t) => {
  const { chain: fake, advance } = fakeChain();
  const a = poolNode('a');
  const b = poolNode('b');
  const health = createChainHealth(['a', 'b'], { maxLagBlocks: 5 });
  // Node b's methods.deny names eth_sendRawTransaction; both serve the pool look.
  const routes = { nodesFor: (method: string) => (method === 'eth_sendRawTransaction' ? { serves: [true, false], prefer: null } : null) };
  const chain = Object.assign(fake as object, { upstreams: [a, b], health, routes });
  const w = createTxWatch(chain as never, { watch_blocks: 50, max_watched: 10, max_watched_per_key: 10 }, noLog);
  t.teardown(() => w.close());
  w.watch('ep:a', '0x01', hashOf(1));
  // Its first look (head 2) starts its count of heads; three heads later, the pools are looked at.
  advance(2);
  advance(5);
  await waitFor(() => a.methods.includes('eth_sendRawTransaction'), { what: 'the send again' });
  t.same(b.methods, ['eth_getTransactionByHash'], 'the node that refuses the method was asked its pool, never sent it');
  t.same(a.methods, ['eth_getTransactionByHash', 'eth_sendRawTransaction']);
  await waitFor(() => health.upstreams[0]!.inflight === 0, { what: 'the send settled' });
  t.equal(health.upstreams[0]!.status().calls, 2, "both of a's calls counted in its health");
  t.equal(health.upstreams[1]!.status().calls, 1);
});
