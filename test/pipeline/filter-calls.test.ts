/**
 * The gateway's filter calls, called directly: what each outcome costs in a real ledger (a result or a
 * -32000 refusal charged, 'too many filters' not, a node's own eth_getLogs error passed on and charged,
 * an upstream failure 502 and refunded), filters kept per caller, blocks fed by the poll of a real anvil,
 * pending transactions reported once, and eth_getLogs asked only of a node that has the range.
 */
import t, { type Test } from 'tap';
import type { Socket } from 'node:net';
import { admitCost, type Caller } from '../../src/pipeline/admission.js';
import { methodRow } from '../../src/jsonrpc/methods.js';
import { answerFilterCall } from '../../src/pipeline/filter-calls.js';
import type { PlannedAnswer } from '../../src/pipeline/plan.js';
import { countingProxy } from '../support/counting-proxy.js';
import { deployEcho, DEV_ADDRESS, echo, result } from '../support/dev-chain.js';
import { fakeUpstream } from '../support/fake-upstream.js';
import { anvilFor } from '../support/gateway.js';
import { keyedCaller, pipelineContext, type PipelineSetup, storedBalance, usageRows } from '../support/pipeline-context.js';

const hex = (n: number): string => `0x${n.toString(16)}`;
const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

function devnet(t: Test, urls: string[], extra: Record<string, unknown> = {}): PipelineSetup {
  // One request per socket at a time: the scripted nodes read one request per chunk of bytes.
  return pipelineContext(t, { chains: { devnet: { chain_id: 31337, upstreams: urls.map((url) => ({ url, pipelining: 1 })) } }, ...extra });
}

/** One filter call as planItem hands it over: admitted (its RU reserved), then answered. */
function filterCall(s: PipelineSetup, caller: Caller, method: string, params: unknown[] = [], id = 1): Promise<PlannedAnswer> {
  const admission = admitCost(s.ctx.tenancy, caller, method);
  if (!admission.ok) throw new Error(`${method} not admitted: ${admission.error}`);
  return answerFilterCall(s.ctx, s.chain('devnet'), caller, { method, params, idText: String(id), admission });
}

const resultOf = (a: PlannedAnswer): unknown => (JSON.parse(String(a.answer)) as { result: unknown }).result;

/** A node that answers eth_blockNumber with `head`, eth_getLogs with `logs` (a JSON-RPC answer member), and null to the rest. */
async function scriptedNode(t: Test, head: number, logs: Record<string, unknown>) {
  return fakeUpstream(t, (socket: Socket, request: string) => {
    const call = JSON.parse(request.slice(request.indexOf('\r\n\r\n') + 4)) as { id: number; method: string };
    const member = call.method === 'eth_blockNumber' ? { result: hex(head) } : call.method === 'eth_getLogs' ? logs : { result: null };
    const body = JSON.stringify({ jsonrpc: '2.0', id: call.id, ...member });
    socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
}

t.test("the catalogue's filter rows: the six filter methods and nothing else", async (t) => {
  const isFilterMethod = (method: string): boolean => methodRow(method)?.filter === true;
  const filters = [
    'eth_newFilter',
    'eth_newBlockFilter',
    'eth_newPendingTransactionFilter',
    'eth_getFilterChanges',
    'eth_getFilterLogs',
    'eth_uninstallFilter',
  ];
  for (const m of filters) t.ok(isFilterMethod(m), m);
  for (const m of ['eth_getLogs', 'eth_subscribe', 'eth_unsubscribe', 'eth_newfilter', '']) t.notOk(isFilterMethod(m), m || '(empty)');
});

t.test('what each outcome costs: results and -32000 refusals charged, the filter limit not', async (t) => {
  const node = await anvilFor(t);
  const s = devnet(t, [node.url], { filters: { max_per_key: 2 } });
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 10_000 });
  t.equal(s.chain('devnet').filters, s.chain('devnet').filters, 'one set of filters per chain');

  const first = await filterCall(s, caller, 'eth_newBlockFilter', [], 1);
  t.match(first, { answer: /^\{"jsonrpc":"2.0","id":1,"result":"0x[0-9a-f]+"\}$/, outcome: 'ok' });
  const id = resultOf(first) as string;
  await filterCall(s, caller, 'eth_newFilter', [{ fromBlock: '0x0' }], 2);
  t.same(
    await filterCall(s, caller, 'eth_newPendingTransactionFilter', [], 3),
    {
      answer: '{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"too many filters"}}',
      outcome: 'ok',
    },
    'a third filter over max_per_key 2',
  );
  t.same(await filterCall(s, caller, 'eth_getFilterChanges', ['0x123456'], 4), {
    answer: '{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"filter not found"}}',
    outcome: 'ok',
  });
  t.same(await filterCall(s, caller, 'eth_getFilterChanges', [id], 5), { answer: '{"jsonrpc":"2.0","id":5,"result":[]}', outcome: 'ok' });
  t.same(await filterCall(s, caller, 'eth_uninstallFilter', [id], 6), { answer: '{"jsonrpc":"2.0","id":6,"result":true}', outcome: 'ok' });
  t.same(await filterCall(s, caller, 'eth_uninstallFilter', [id], 7), { answer: '{"jsonrpc":"2.0","id":7,"result":false}', outcome: 'ok' });

  const cost = (m: string): number => s.ctx.tenancy.ruCost(m);
  t.same(
    usageRows(s).map((r) => [r.method, r.status, r.requests, r.ru]),
    [
      ['eth_getFilterChanges', 0, 2, 2 * cost('eth_getFilterChanges')],
      ['eth_newBlockFilter', 0, 1, cost('eth_newBlockFilter')],
      ['eth_newFilter', 0, 1, cost('eth_newFilter')],
      ['eth_newPendingTransactionFilter', -32000, 1, 0],
      ['eth_uninstallFilter', 0, 2, 2 * cost('eth_uninstallFilter')],
    ],
  );
  const spent = 2 * cost('eth_getFilterChanges') + cost('eth_newBlockFilter') + cost('eth_newFilter') + 2 * cost('eth_uninstallFilter');
  t.equal(storedBalance(s, ownerId), 10_000 - spent);
});

t.test("a node's own eth_getLogs error is passed on and charged; a failure is a 502, refunded and logged", async (t) => {
  const refusing = await scriptedNode(t, 16, { error: { code: -32005, message: 'query returned more than 10000 results' } });
  const s = devnet(t, [refusing.url]);
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 1000 });
  const id = resultOf(await filterCall(s, caller, 'eth_newFilter', [{ fromBlock: '0x1', toBlock: '0x10' }])) as string;
  t.same(await filterCall(s, caller, 'eth_getFilterLogs', [id], 2), {
    answer: '{"jsonrpc":"2.0","id":2,"error":{"code":-32005,"message":"query returned more than 10000 results"}}',
    outcome: 'ok',
  });

  const broken = await fakeUpstream(t, 'http-500');
  const b = devnet(t, [broken.url]);
  const other = keyedCaller(b, 'devnet', { ru: 1000 });
  const bid = resultOf(await filterCall(b, other.caller, 'eth_newFilter', [{ fromBlock: '0x1', toBlock: '0x10' }])) as string;
  t.same(await filterCall(b, other.caller, 'eth_getFilterLogs', [bid], 3), {
    answer: '{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Upstream node error"}}',
    outcome: 'upstream_error',
  });
  t.same(
    usageRows(b).map((r) => [r.method, r.status, r.ru]),
    [
      ['eth_getFilterLogs', 502, 0],
      ['eth_newFilter', 0, b.ctx.tenancy.ruCost('eth_newFilter')],
    ],
  );
  t.ok(
    b.logLines.some((l) => l.startsWith('warn a filter call could not read the chain chain=devnet method=eth_getFilterLogs')),
    'logged with its chain and method',
  );
  t.equal(storedBalance(s, ownerId), 1000 - s.ctx.tenancy.ruCost('eth_newFilter') - s.ctx.tenancy.ruCost('eth_getFilterLogs'));
});

t.test("filters are the caller's: another key or IP cannot read or remove them", async (t) => {
  const node = await anvilFor(t);
  const s = devnet(t, [node.url]);
  const alice = keyedCaller(s, 'devnet').caller;
  const bob = keyedCaller(s, 'devnet').caller;
  const id = resultOf(await filterCall(s, alice, 'eth_newBlockFilter')) as string;
  for (const method of ['eth_getFilterChanges', 'eth_uninstallFilter']) {
    t.match(
      await filterCall(s, bob, method, [id]),
      method === 'eth_uninstallFilter' ? { answer: /"result":false/ } : { answer: /"filter not found"/ },
      `${method} by another key`,
    );
  }
  t.match(await filterCall(s, alice, 'eth_getFilterChanges', [id]), { answer: /"result":\[\]/ }, 'still there for its owner');
});

t.test('without WebSocket upstreams, block filters are fed by a poll of the node', async (t) => {
  const node = await anvilFor(t);
  const s = devnet(t, [node.url]);
  const { caller } = keyedCaller(s, 'devnet');
  const id = resultOf(await filterCall(s, caller, 'eth_newBlockFilter')) as string;
  await result(node.url, 'anvil_mine', ['0x2']);
  const hashes = await Promise.all(
    [1, 2].map(async (n) => (await result<{ hash: string }>(node.url, 'eth_getBlockByNumber', [hex(n), false])).hash),
  );
  const seen: unknown[] = [];
  for (let i = 0; i < 40 && seen.length < 2; i++) {
    seen.push(...(resultOf(await filterCall(s, caller, 'eth_getFilterChanges', [id])) as unknown[]));
    if (seen.length < 2) await tick(100);
  }
  t.same(seen, hashes, 'each new block once, in order');
});

t.test('log filters read the node: changes since the last poll, and the whole range', async (t) => {
  const node = await anvilFor(t);
  const s = devnet(t, [node.url]);
  const { caller } = keyedCaller(s, 'devnet');
  const address = await deployEcho(node.url);
  await echo(node.url, address, '0x01');
  const id = resultOf(await filterCall(s, caller, 'eth_newFilter', [{ address, fromBlock: '0x0' }])) as string;
  await echo(node.url, address, '0x02');
  await echo(node.url, address, '0x03');
  const dataOf = (logs: unknown): string[] => (logs as Array<{ data: string }>).map((l) => l.data);
  // The head is asked before each poll, so the blocks just mined are covered; the log before the filter is not news.
  t.same(
    dataOf(resultOf(await filterCall(s, caller, 'eth_getFilterChanges', [id]))),
    ['0x02', '0x03'],
    'the logs since the filter was made, in order',
  );
  t.same(dataOf(resultOf(await filterCall(s, caller, 'eth_getFilterChanges', [id]))), [], 'nothing new since');
  t.same(dataOf(resultOf(await filterCall(s, caller, 'eth_getFilterLogs', [id]))), ['0x01', '0x02', '0x03'], 'the whole range');
});

t.test('pending filters: a transaction the gateway forwarded is reported once, while a pending filter is open', async (t) => {
  const node = await anvilFor(t);
  const s = devnet(t, [node.url]);
  const { caller } = keyedCaller(s, 'devnet');
  const filters = s.chain('devnet').filters;
  const early = `0x${'11'.repeat(32)}`;
  const sent = `0x${'22'.repeat(32)}`;
  filters.notePendingTransaction(early);
  const id = resultOf(await filterCall(s, caller, 'eth_newPendingTransactionFilter')) as string;
  filters.notePendingTransaction(sent);
  filters.notePendingTransaction(sent);
  t.same(resultOf(await filterCall(s, caller, 'eth_getFilterChanges', [id])), [sent], 'once, and not the one sent before the filter');
  const second = resultOf(await filterCall(s, caller, 'eth_newPendingTransactionFilter')) as string;
  filters.notePendingTransaction(sent);
  t.same(
    resultOf(await filterCall(s, caller, 'eth_getFilterChanges', [second])),
    [],
    'a hash already reported is not news to a later filter',
  );
});

t.test("with a WebSocket upstream, pending filters hear the node's subscription, not the gateway's own sends", async (t) => {
  const node = await anvilFor(t);
  const s = pipelineContext(t, { chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.wsUrl }] } } });
  const { caller } = keyedCaller(s, 'devnet');
  const id = resultOf(await filterCall(s, caller, 'eth_newPendingTransactionFilter')) as string;
  const noted = `0x${'33'.repeat(32)}`;
  s.chain('devnet').filters.notePendingTransaction(noted);
  // The upstream subscription is opened with the filter: transactions sent before it is live are not seen.
  const sent: string[] = [];
  const heard: unknown[] = [];
  for (let i = 0; i < 30 && heard.length === 0; i++) {
    sent.push(await result<string>(node.url, 'eth_sendTransaction', [{ from: DEV_ADDRESS, to: DEV_ADDRESS, value: '0x1' }]));
    await tick(100);
    heard.push(...(resultOf(await filterCall(s, caller, 'eth_getFilterChanges', [id])) as unknown[]));
  }
  t.ok(heard.length > 0, "the node's pending transactions are reported");
  t.same(
    heard.filter((h) => !sent.includes(h as string)),
    [],
    'only those: not the hash the gateway noted itself',
  );
});

t.test("eth_getLogs for a filter skips a node that is behind the range's end", async (t) => {
  const [behind, ahead] = await Promise.all([anvilFor(t), anvilFor(t)]);
  await result(ahead.url, 'anvil_mine', ['0x5']);
  const [pb, pa] = await Promise.all([countingProxy(t, behind.url), countingProxy(t, ahead.url)]);
  const s = devnet(t, [pb.url, pa.url]);
  // The node ahead is out of rotation: the chain's pick is the one behind, tried first.
  for (let k = 0; k < 3; k++) s.chain('devnet').health.upstreams[1]!.record('failed', 1);
  const { caller } = keyedCaller(s, 'devnet');
  const id = resultOf(await filterCall(s, caller, 'eth_newFilter', [{ fromBlock: '0x1', toBlock: '0x5' }])) as string;
  t.same(resultOf(await filterCall(s, caller, 'eth_getFilterLogs', [id])), []);
  t.equal(pb.count('eth_getLogs'), 0, 'the node at block 0 was not asked for blocks 1 to 5');
  t.ok(pb.count('eth_blockNumber') >= 1, 'it was asked its head');
  t.equal(pa.count('eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x5' }]), 1, 'the node that has the range answered');
});
