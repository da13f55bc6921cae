import t from 'tap';
import type { UpstreamConfig } from '../../src/config/schema.js';
import { createNodeRoutes, type NodeRoutesOptions } from '../../src/chain/node-routes.js';
import { methodRow } from '../../src/jsonrpc/methods.js';
import { stateBlockOf } from '../../src/jsonrpc/state-reads.js';

const ADDRESS = '0x000000000000000000000000000000000000dEaD';
const HASH = `0x${'ab'.repeat(32)}`;
const CALL = { to: ADDRESS, data: '0x' };

function node(name: string, extra: { deny?: string[]; archive?: boolean } = {}): UpstreamConfig {
  return {
    name,
    url: `http://${name}`,
    ws: undefined,
    headers: {},
    max_connections: 1,
    pipelining: 1,
    methods: { deny: extra.deny ?? [] },
    archive: extra.archive ?? false,
    archive_auto: false,
    methods_auto: false,
    tier: 0,
  };
}

function options(head: number | null, known: Record<string, number> = {}): NodeRoutesOptions {
  return {
    stateHistoryBlocks: 128,
    head: () => head,
    blockNumberOf: (hash) => known[hash] ?? null,
    tags: { latest: () => head, safe: () => null, finalized: () => null },
    rewriteTags: null,
  };
}

t.test('the block of a state read', async (t) => {
  t.equal(stateBlockOf('eth_getBalance', [ADDRESS, '0x10']), 16);
  t.equal(stateBlockOf('eth_getBalance', [ADDRESS, 'latest']), null);
  t.equal(stateBlockOf('eth_getBalance', [ADDRESS, 'earliest']), 0);
  t.equal(stateBlockOf('eth_getBalance', [ADDRESS, 'finalized']), null);
  t.equal(stateBlockOf('eth_getBalance', [ADDRESS, HASH]), HASH, 'a 32-byte reference is a hash');
  t.equal(stateBlockOf('eth_getBalance', [ADDRESS, { blockHash: HASH, requireCanonical: true }]), HASH);
  t.equal(stateBlockOf('eth_getBalance', [ADDRESS, { blockNumber: '0x5' }]), 5);
  t.equal(stateBlockOf('eth_getStorageAt', [ADDRESS, '0x0', '0x7']), 7, 'the block is the third param');
  t.equal(stateBlockOf('eth_getProof', [ADDRESS, [], '0x8']), 8);
  t.equal(stateBlockOf('eth_call', [CALL, '0x9']), 9);
  t.equal(stateBlockOf('debug_traceCall', [CALL, '0xa', {}]), 10);
  t.equal(stateBlockOf('trace_call', [CALL, ['trace'], '0xb']), 11);
  t.equal(stateBlockOf('eth_getBlockByNumber', ['0x1', false]), null, 'not a state read');
});

t.test('upstreams that declare nothing: any node, for every call', async (t) => {
  const routes = createNodeRoutes([node('a'), node('b')], options(1000));
  t.equal(routes.nodesFor('eth_getBalance', [ADDRESS, '0x1']), null);
  t.equal(routes.nodesFor('eth_getLogs', [{}]), null);
  t.equal(routes.serves(1, 'eth_getLogs'), true);
});

t.test('methods.deny: a call goes only to the nodes that serve its method', async (t) => {
  const routes = createNodeRoutes([node('a', { deny: ['eth_getLogs'] }), node('b'), node('c', { deny: ['eth_get*'] })], options(1000));
  const logs = routes.nodesFor('eth_getLogs', [{}]);
  t.same(logs, { serves: [false, true, false], prefer: null });
  t.equal(routes.nodesFor('eth_getLogs', [{ fromBlock: '0x1' }]), logs, 'made once per method: the same choice for every call');
  t.same(routes.nodesFor('eth_getBalance', [ADDRESS, '0x1']), { serves: [true, true, false], prefer: null });
  t.equal(routes.nodesFor('eth_call', [CALL, 'latest']), null, 'a method every node serves: any node');
  t.equal(routes.serves(0, 'eth_getLogs'), false);
  t.equal(routes.serves(1, 'eth_getLogs'), true);
  t.equal(routes.serves(0, 'eth_call'), true);
});

t.test('archive: a state read about an old block goes to an archive node first', async (t) => {
  const upstreams = [node('full'), node('archive', { archive: true }), node('archive-no-call', { archive: true, deny: ['eth_call'] })];
  const routes = createNodeRoutes(upstreams, options(1000, { [HASH]: 990 }));
  const old = { serves: null, prefer: [false, true, true] };
  t.same(routes.nodesFor('eth_getBalance', [ADDRESS, '0x1']), old, 'block 1 with the head at 1000');
  t.same(routes.nodesFor('eth_getBalance', [ADDRESS, `0x${(1000 - 129).toString(16)}`]), old, 'head - 129: old');
  t.equal(routes.nodesFor('eth_getBalance', [ADDRESS, `0x${(1000 - 128).toString(16)}`]), null, 'head - 128: recent');
  t.equal(routes.nodesFor('eth_getBalance', [ADDRESS, 'latest']), null, 'a tag is recent');
  t.same(routes.nodesFor('eth_getBalance', [ADDRESS, 'earliest']), old, 'earliest is block 0');
  t.equal(routes.nodesFor('eth_getBalance', [ADDRESS, HASH]), null, 'a hash whose number is known and recent');
  t.same(routes.nodesFor('eth_getBalance', [ADDRESS, { blockHash: `0x${'cd'.repeat(32)}` }]), old, 'an unknown hash is old');
  t.same(
    routes.nodesFor('eth_call', [CALL, '0x1']),
    { serves: [true, true, false], prefer: [false, true, false] },
    'only archive nodes that serve the method are preferred',
  );
  t.equal(routes.nodesFor('eth_getBlockByNumber', ['0x1', false]), null, 'not a state read: any node');
  const noHead = createNodeRoutes(upstreams, options(null));
  t.equal(noHead.nodesFor('eth_getBalance', [ADDRESS, '0x1']), null, 'no head known: a numbered block is taken as recent');
  t.same(noHead.nodesFor('eth_getBalance', [ADDRESS, HASH]), old, 'but an unknown hash is still old');
});

t.test('archive nodes that do not serve the method: no preference', async (t) => {
  const routes = createNodeRoutes(
    [node('full'), node('archive', { archive: true, deny: ['eth_getProof', 'eth_getBalance'] })],
    options(1000),
  );
  t.same(routes.nodesFor('eth_getBalance', [ADDRESS, '0x1']), { serves: [true, false], prefer: null });
});

t.test('headFor: what a call asks of its node, on a chain of several nodes only', async (t) => {
  const row = (m: string) => methodRow(m)!;
  const tags = { latest: () => 100, safe: () => 90, finalized: () => null };
  const routes = createNodeRoutes([node('a'), node('b')], { ...options(100), tags });
  t.equal(routes.headFor(row('eth_getBalance'), [ADDRESS, 'latest']), 100, 'latest: the served head');
  t.equal(routes.headFor(row('eth_getBalance'), [ADDRESS, '0x10']), 16);
  t.equal(routes.headFor(row('eth_getBalance'), [ADDRESS, 'safe']), 90);
  t.equal(routes.headFor(row('eth_getBalance'), [ADDRESS, 'finalized']), null, 'finalized not known: none');
  t.equal(routes.headFor(row('eth_getTransactionReceipt'), [HASH]), null, 'a method naming no block: none');
  t.equal(routes.headFor(row('eth_blockNumber'), []), 100);
  let reads = 0;
  const single = createNodeRoutes([node('a')], {
    ...options(100),
    tags: {
      latest: () => ++reads,
      safe: () => ++reads,
      finalized: () => ++reads,
    },
  });
  t.equal(single.headFor(row('eth_getBalance'), [ADDRESS, 'latest']), null, 'one node: no choice to make');
  t.equal(single.headFor(row('eth_getBalance'), [ADDRESS, '0x10']), null);
  t.equal(reads, 0, 'nothing read on a chain of one node');
});

t.test('rewrite: every tag under rewrite_tags, safe and finalized alone for a beacon chain named, nothing else', async (t) => {
  const row = (m: string) => methodRow(m)!;
  const tags = { latest: () => 100, safe: () => 90, finalized: () => 80 };
  const none = createNodeRoutes([node('a'), node('b')], { ...options(100), tags });
  t.equal(none.rewrites, false, 'neither: the chain never rewrites');
  const all = createNodeRoutes([node('a'), node('b')], { ...options(100), tags, rewriteTags: 'all' });
  t.equal(all.rewrites, true);
  t.same(all.rewrite(row('eth_getBalance'), [ADDRESS, 'latest']), [ADDRESS, '0x64']);
  t.same(all.rewrite(row('eth_getBalance'), [ADDRESS, 'finalized']), [ADDRESS, '0x50']);
  t.equal(all.rewrite(row('eth_getTransactionReceipt'), [HASH]), null, 'no block: unchanged');
  const single = createNodeRoutes([node('a')], { ...options(100), tags, rewriteTags: 'all' });
  t.same(single.rewrite(row('eth_getBalance'), [ADDRESS, 'latest']), [ADDRESS, '0x64'], 'asked for: also on one node');
  const final = createNodeRoutes([node('a'), node('b')], { ...options(100), tags, rewriteTags: 'final' });
  t.equal(final.rewrite(row('eth_getBalance'), [ADDRESS, 'latest']), null);
  t.same(final.rewrite(row('eth_getBalance'), [ADDRESS, 'safe']), [ADDRESS, '0x5a']);
});

t.test('findings (archive: auto, methods: auto) replace what a node declares, and the choices are made anew', async (t) => {
  const routes = createNodeRoutes([node('a'), node('b', { deny: ['eth_getLogs'] })], options(1000));
  t.equal(routes.nodesFor('debug_traceTransaction', [HASH]), null, 'served by both at first');
  routes.update(0, { deny: ['debug_*'] });
  t.same(routes.nodesFor('debug_traceTransaction', [HASH])?.serves, [false, true]);
  t.same(routes.nodesFor('eth_getLogs', [{}])?.serves, [true, false], 'the configured deny stays');
  t.same(routes.nodesFor('eth_getBalance', [ADDRESS, '0x1']), null, 'no archive node: any');
  routes.update(1, { archive: true });
  t.same(routes.nodesFor('eth_getBalance', [ADDRESS, '0x1'])?.prefer, [false, true], 'old state: the archive node first');
  routes.update(1, { archive: false });
  routes.update(0, { deny: [] });
  t.equal(routes.nodesFor('debug_traceTransaction', [HASH]), null, 'served by both again');
});
