import t from 'tap';
import { oldBlock, probeArchive, probeMethodGroups, watchCapabilities, type Found } from '../../src/chain/capabilities.js';
import { capabilityReport } from '../../src/chain/node-findings.js';
import type { UpstreamConfig } from '../../src/config/schema.js';
import { NodeRpcError } from '../../src/upstreams/rpc-call.js';
import { waitFor } from '../support/wait-for.js';

const answering = (result: unknown) => async () => result;
const failing = (code: number, message: string) => async () => {
  throw new NodeRpcError(code, message);
};

t.test('archive: an answer is archive, a pruned-state error is not, anything else tells nothing', async (t) => {
  t.equal(await probeArchive(answering('0x0'), 1), true);
  for (const m of ['missing trie node 1234 (path )', 'state not available', 'historical state 0xab is not available', 'pruned'])
    t.equal(await probeArchive(failing(-32000, m), 1), false, m);
  t.equal(await probeArchive(failing(-32000, 'execution reverted'), 1), null, 'another error');
  t.equal(
    await probeArchive(async () => {
      throw new Error('socket hang up');
    }, 1),
    null,
    'no answer',
  );
  t.equal(oldBlock(null, 128), null, 'no head known');
  t.equal(oldBlock(100, 128), null, 'a chain younger than the state every node keeps');
  t.equal(oldBlock(1000, 128), 1);
});

t.test('methods: -32601 or a "does not exist" error is a group not served; other errors are served', async (t) => {
  const call = async (method: string): Promise<unknown> => {
    if (method === 'debug_traceTransaction') throw new NodeRpcError(-32601, 'method not found');
    if (method === 'trace_transaction') throw new NodeRpcError(-32000, 'the method trace_transaction does not exist/is not available');
    if (method === 'txpool_status') return { pending: '0x0', queued: '0x0' };
    throw new Error(method);
  };
  t.same(await probeMethodGroups(call), ['trace_*', 'debug_*']);
  t.same(await probeMethodGroups(failing(-32000, 'transaction not found')), [], 'an error about the call: served');
  t.equal(
    await probeMethodGroups(async () => {
      throw new Error('timeout');
    }),
    null,
  );
});

t.test('the watch asks auto nodes only, tells changes once, and keeps a finding when a probe cannot tell', async (t) => {
  let pruned = true;
  let down = false;
  const asked: number[] = [];
  const found: Array<[number, Found]> = [];
  const stop = watchCapabilities({
    nodes: [
      { archive_auto: true, methods_auto: false },
      { archive_auto: false, methods_auto: false },
    ],
    head: () => 1000,
    stateHistoryBlocks: 128,
    recheckMs: 20,
    call: async (i, method) => {
      asked.push(i);
      if (down) throw new Error('down');
      if (method === 'eth_getBalance' && pruned) throw new NodeRpcError(-32000, 'missing trie node');
      return '0x0';
    },
    onFound: (i, f) => found.push([i, f]),
  });
  t.teardown(stop);
  await waitFor(() => found.length === 1, { what: 'the first finding' });
  t.same(found, [[0, { archive: false }]]);
  t.notOk(asked.includes(1), 'a node with nothing left to auto is never asked');
  down = true;
  const before = asked.length;
  await waitFor(() => asked.length > before + 2, { what: 'rechecks while down' });
  t.equal(found.length, 1, 'a node that cannot be asked keeps its finding');
  down = false;
  pruned = false;
  await waitFor(() => found.length === 2, { what: 'the change' });
  t.same(found[1], [0, { archive: true }]);
});

t.test('healthz text', async (t) => {
  const u = { archive: false, archive_auto: true, methods: { deny: [] }, methods_auto: true } as unknown as UpstreamConfig;
  t.same(capabilityReport(u, undefined), { archive: 'unknown (auto)', methods: 'unknown (auto)' });
  t.same(capabilityReport(u, { archive: true, deny: ['debug_*'] }), { archive: 'true (auto)', methods: 'all but debug_* (auto)' });
});
