/**
 * sharedCall, called directly over a real anvil behind a counting proxy: final answers come back from the
 * cache at the cache-hit price (and nothing else does), identical reads in flight ride on one upstream
 * call with each caller's own id, callers leave a flight without taking it from the others, a failure
 * or a stream ends the sharing, and what answers teach (the head, a pending transaction) is kept.
 */
import t, { type Test } from 'tap';
import { methodRow } from '../../src/jsonrpc/methods.js';
import type { ForwardCall, ForwardFailure } from '../../src/pipeline/forward.js';
import type { Forward } from '../../src/pipeline/plan.js';
import { sharedCall } from '../../src/pipeline/shared-call.js';
import { countingProxy } from '../support/counting-proxy.js';
import { DEV_ADDRESS, result } from '../support/dev-chain.js';
import { fakeUpstream } from '../support/fake-upstream.js';
import { anvilFor } from '../support/gateway.js';
import { pipelineContext, type PipelineSetup } from '../support/pipeline-context.js';
import { waitFor } from '../support/wait-for.js';

const hex = (n: number): string => `0x${n.toString(16)}`;

type Heard =
  | { kind: 'whole'; body: string }
  | { kind: 'streamed'; body: string; began: boolean }
  | { kind: 'failed'; started: boolean; reason: string; failure?: ForwardFailure; failedUpstream?: string };

/** One forwarded call as the pipeline makes it, with what its sink heard. */
interface Made {
  call: ForwardCall;
  f: Forward;
  heard: Promise<Heard>;
  settled(): boolean;
}

function make(s: PipelineSetup, method: string, params: unknown[], idText: string, ru = 20): Made {
  const f: Forward = {
    method,
    row: methodRow(method)!,
    params,
    paramsJson: JSON.stringify(params),
    idText,
    admission: { ok: true, reservation: null, ru, span: undefined },
    watch: null,
  };
  let done = false;
  let resolve!: (h: Heard) => void;
  const heard = new Promise<Heard>((r) => (resolve = r));
  const parts: Buffer[] = [];
  let began = false;
  const settle = (h: Heard): void => {
    if (done) throw new Error(`a second outcome for ${idText}: ${JSON.stringify(h).slice(0, 200)}`);
    done = true;
    resolve(h);
  };
  const sink = {
    failedUpstream: undefined as string | undefined,
    whole: (body: Buffer) => settle({ kind: 'whole', body: body.toString() }),
    begin() {
      began = true;
    },
    chunk(buf: Buffer) {
      parts.push(buf);
      return true;
    },
    end: () => settle({ kind: 'streamed', body: Buffer.concat(parts).toString(), began }),
    fail(started: boolean, reason: string, failure?: ForwardFailure) {
      settle({
        kind: 'failed',
        started,
        reason,
        ...(failure ? { failure } : {}),
        ...(sink.failedUpstream !== undefined ? { failedUpstream: sink.failedUpstream } : {}),
      });
    },
  };
  const call = sharedCall(s.ctx, s.chain('devnet'), f, sink);
  return { call, f, heard, settled: () => done };
}

const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The answer with its id replaced, to compare answers given to different callers. */
const withId = (h: Heard, id: string): string =>
  h.kind === 'failed' ? '' : h.body.replace(/^\{"jsonrpc":"2.0","id":[^,]+,/, `{"jsonrpc":"2.0","id":${id},`);

/** A real anvil at block 10 behind a counting proxy, and a context whose devnet chain goes through the proxy. */
async function setup(t: Test, anvilArgs: string[] = []) {
  const node = await anvilFor(t, { args: anvilArgs });
  await result(node.url, 'anvil_mine', ['0xa']);
  const proxy = await countingProxy(t, node.url);
  const s = pipelineContext(t, {
    chains: { devnet: { chain_id: 31337, finality_depth: 3, upstreams: [{ url: proxy.url }] } },
    cache: { hit_ru_factor: 0.5 },
  });
  return { node, proxy, s };
}

t.test('final answers come from the cache at the hit price; recent, null and state answers never do', async (t) => {
  // anvil's finalized block is two epochs of 2 slots behind its head: 6, below head - finality_depth (7).
  const { node, proxy, s } = await setup(t, ['--slots-in-an-epoch', '2']);
  t.equal(await s.chain('devnet').head.fresh(), 10);
  await waitFor(() => s.chain('devnet').finality.finalized()?.number === 6, { what: "the nodes' finalized block" });
  const hashOf = async (n: number): Promise<string> =>
    (await result<{ hash: string }>(node.url, 'eth_getBlockByNumber', [hex(n), false])).hash;
  const cases: Array<[string, string, unknown[], boolean]> = [
    ['a block below the finalized one', 'eth_getBlockByNumber', ['0x5', false], true],
    ['the finalized block', 'eth_getBlockByNumber', ['0x6', false], true],
    ['a block above the finalized one, though finality_depth (3) would take it', 'eth_getBlockByNumber', ['0x7', false], false],
    ['net_version, fixed per chain', 'net_version', [], true],
    ['a block by hash, 5 deep (read from the answer)', 'eth_getBlockByHash', [await hashOf(5), false], true],
    ['a block 1 deep', 'eth_getBlockByNumber', ['0x9', false], false],
    ['a block by hash 1 deep', 'eth_getBlockByHash', [await hashOf(9), false], false],
    ['a block not mined yet (null)', 'eth_getBlockByNumber', ['0x64', false], false],
    ['a null answer about a final block', 'eth_getTransactionByBlockNumberAndIndex', ['0x5', '0x0'], false],
    ['state at an old block', 'eth_getBalance', [DEV_ADDRESS, '0x5'], false],
  ];
  for (const [why, method, params, cached] of cases) {
    const first = make(s, method, params, '1', 15);
    const a = await first.heard;
    await tick(20);
    const second = make(s, method, params, '"two"', 15);
    t.equal(second.settled(), false, `${why}: a cached answer too is delivered later, never during the call`);
    const b = await second.heard;
    t.equal(b.kind, 'whole');
    t.equal(withId(b, '1'), withId(a, '1'), `${why}: the same answer`);
    t.match(b, { body: /^\{"jsonrpc":"2.0","id":"two",/ }, `${why}: with the second caller's id`);
    t.equal(proxy.count(method, params), cached ? 1 : 2, `${why}: ${cached ? 'one upstream call' : 'asked each time'}`);
    t.equal(second.f.admission.ru, cached ? 8 : 15, `${why}: ${cached ? 'half price, rounded up' : 'full price'}`);
  }
  // A hit whose caller went away before it was delivered is not delivered.
  const gone = make(s, 'eth_getBlockByNumber', ['0x5', false], '3');
  gone.call.abort();
  await tick(20);
  t.equal(gone.settled(), false);
});

t.test('identical reads in flight share one upstream call; each caller gets its own id', async (t) => {
  const { proxy, s } = await setup(t);
  const params = [DEV_ADDRESS, 'latest'];
  const calls = ['1', '"b"', '12345678901234567890', 'null'].map((id) => make(s, 'eth_getBalance', params, id));
  const other = make(s, 'eth_getBalance', [DEV_ADDRESS, 'pending'], '9');
  const heard = await Promise.all(calls.map((c) => c.heard));
  await other.heard;
  t.equal(proxy.count('eth_getBalance', params), 1, 'one upstream call for four callers');
  t.equal(proxy.count('eth_getBalance'), 2, 'a call with other params is not shared');
  for (const [i, id] of ['1', '"b"', '12345678901234567890', 'null'].entries()) {
    t.match(heard[i], { kind: 'whole', body: new RegExp(`^\\{"jsonrpc":"2.0","id":${id},"result":"0x[0-9a-f]+"\\}$`) }, `caller ${id}`);
    t.equal(withId(heard[i]!, '0'), withId(heard[0]!, '0'));
  }
});

t.test('a caller that leaves only leaves the flight; when all have left the call is dropped', async (t) => {
  const { proxy, s } = await setup(t);
  const params = [DEV_ADDRESS, 'latest'];
  const leader = make(s, 'eth_getTransactionCount', params, '1');
  const follower = make(s, 'eth_getTransactionCount', params, '2');
  leader.call.abort();
  t.match(
    await follower.heard,
    { kind: 'whole', body: /^\{"jsonrpc":"2.0","id":2,"result":"0x0"\}$/ },
    'the follower is answered though the leader left',
  );
  t.equal(leader.settled(), false, 'the leader hears nothing');
  t.equal(proxy.count('eth_getTransactionCount'), 1);

  const hung = await fakeUpstream(t, 'hang');
  const h = pipelineContext(t, { chains: { devnet: { chain_id: 31337, upstreams: [{ url: hung.url }] } } });
  const a = make(h, 'eth_getTransactionCount', params, '1');
  const b = make(h, 'eth_getTransactionCount', params, '2');
  await waitFor(() => hung.requests.length === 1, { what: 'the shared call reaches the node' });
  a.call.abort();
  b.call.abort();
  const c = make(h, 'eth_getTransactionCount', params, '3');
  await waitFor(() => hung.requests.length === 2, { what: 'a new call reaches the node' });
  t.equal(hung.requests.length, 2, 'a call after everyone left starts a new flight');
  t.same([a.settled(), b.settled(), c.settled()], [false, false, false], 'nobody who left hears anything');
  c.call.abort();
});

t.test('a failure before any byte reaches every caller, with the upstream it came from', async (t) => {
  const broken = await fakeUpstream(t, 'http-500');
  const s = pipelineContext(t, { chains: { devnet: { chain_id: 31337, upstreams: [{ url: broken.url }] } } });
  const calls = ['1', '2', '3'].map((id) => make(s, 'eth_getBalance', [DEV_ADDRESS, 'latest'], id));
  for (const c of calls) {
    t.same(await c.heard, {
      kind: 'failed',
      started: false,
      reason: 'upstream answered HTTP 500',
      failedUpstream: new URL(broken.url).host,
    });
  }
  t.equal(broken.requests.length, 1, 'one upstream call for all');
});

t.test("an answer too large to hold whole stays the leader's; each follower makes its own call", async (t) => {
  const { proxy, s } = await setup(t);
  const big = '0x00000000000000000000000000000000000000b1';
  // Runtime code returning 100 000 zero bytes: PUSH3 100000, PUSH1 0, RETURN.
  const params = [{ to: big, data: '0x' }, 'latest', { [big]: { code: '0x620186a06000f3' } }];
  const calls = ['1', '2', '3'].map((id) => make(s, 'eth_call', params, id));
  await waitFor(() => calls.every((c) => c.settled()), { what: 'every caller answered' });
  const heard = await Promise.all(calls.map((c) => c.heard));
  for (const [i, h] of heard.entries()) {
    t.same(
      h,
      { kind: 'streamed', began: true, body: `{"jsonrpc":"2.0","id":${i + 1},"result":"0x${'0'.repeat(200_000)}"}` },
      `caller ${i + 1}`,
    );
  }
  t.equal(proxy.count('eth_call'), 3, "the leader's call and one of each follower's own");
});

t.test('what answers teach: an eth_blockNumber is the head, a sent transaction is news for pending filters', async (t) => {
  const { node, proxy, s } = await setup(t, ['--no-mining']);
  const devnet = s.chain('devnet');
  const head = devnet.head;
  head.note(3);
  const bn = make(s, 'eth_blockNumber', [], '1');
  const seen = await bn.heard;
  t.same(seen, { kind: 'whole', body: '{"jsonrpc":"2.0","id":1,"result":"0xa"}' });
  t.equal(head.now(), 10, 'the head the node told');
  t.equal(proxy.count('eth_blockNumber'), 1);

  const filters = devnet.filters;
  const id = (await filters.call('ip:192.0.2.1', 'eth_newPendingTransactionFilter', [])) as string;
  const raw = await result<string>(node.url, 'eth_signTransaction', [
    { from: DEV_ADDRESS, to: DEV_ADDRESS, value: '0x1', gas: '0x5208', nonce: '0x0' },
  ]);
  const sent = await make(s, 'eth_sendRawTransaction', [raw], '2').heard;
  if (sent.kind !== 'whole') throw new Error(`not sent: ${JSON.stringify(sent)}`);
  const hash = (JSON.parse(sent.body) as { result: string }).result;
  t.match(hash, /^0x[0-9a-f]{64}$/);
  t.same(await filters.call('ip:192.0.2.1', 'eth_getFilterChanges', [id]), [hash], 'the pending filter reports it (no block was mined)');
  t.same(await filters.call('ip:192.0.2.1', 'eth_getFilterChanges', [id]), [], 'once');
});
