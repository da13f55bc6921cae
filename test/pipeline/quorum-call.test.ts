/**
 * quorumCall over fake upstreams on real sockets, each node's answers scripted (the end-to-end file
 * test/e2e/quorum.test.ts runs the same road over real anvils, one behind a relay that alters balances): agreement,
 * a disagreeing node counted and logged (a late one too), on_mismatch majority and error, ejection after
 * eject_after, a client that leaves cancelling the attempts, a failed node replaced, too few nodes, and answers too
 * large to compare.
 */
import t, { type Test } from 'tap';
import type { Socket } from 'node:net';
import type { QuorumConfig } from '../../src/config/consistency.js';
import { methodRow } from '../../src/jsonrpc/methods.js';
import type { Logger } from '../../src/log.js';
import type { ConsensusOutcome } from '../../src/metrics/registry.js';
import type { ForwardFailure } from '../../src/pipeline/forward.js';
import { quorumCall, type QuorumChain, quorumOf } from '../../src/pipeline/quorum-call.js';
import { QUORUM_ANSWER_BYTES, QUORUM_LABEL, quorumFailure } from '../../src/pipeline/quorum-failures.js';
import { createHttpUpstream } from '../../src/upstreams/http-client.js';
import { createChainHealth } from '../../src/upstreams/selection.js';
import { fakeUpstream } from '../support/fake-upstream.js';
import { waitFor } from '../support/wait-for.js';
import { resetSocket } from '../support/reset-socket.js';

/** What a scripted node does with a call: answer (after `afterMs`), hang, or reset the connection. */
type Script = { result: unknown; afterMs?: number } | { error: object; afterMs?: number } | { bytes: number } | 'hang' | 'reset';

interface Node {
  name: string;
  url: string;
  /** Calls received. */
  calls: number;
  /** Connections the gateway closed while a call on them was unanswered. */
  dropped: number;
}

async function node(t: Test, name: string, script: () => Script): Promise<Node> {
  const n: Node = { name, url: '', calls: 0, dropped: 0 };
  const waiting = new Set<Socket>();
  const fake = await fakeUpstream(t, (socket, request) => {
    n.calls++;
    const call = JSON.parse(request.slice(request.indexOf('\r\n\r\n') + 4)) as { id: number };
    const s = script();
    const write = (answer: object): void => {
      waiting.delete(socket);
      const text = JSON.stringify({ jsonrpc: '2.0', id: call.id, ...answer });
      socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
    };
    if (!waiting.has(socket)) {
      waiting.add(socket);
      socket.once('close', () => {
        if (waiting.has(socket)) n.dropped++;
      });
    }
    if (s === 'hang') return;
    if (s === 'reset') {
      waiting.delete(socket);
      resetSocket(socket);
      return;
    }
    if ('bytes' in s) return write({ result: `0x${'ab'.repeat(s.bytes / 2)}` });
    setTimeout(() => write('result' in s ? { result: s.result } : { error: s.error }), s.afterMs ?? 1);
  });
  n.url = fake.url;
  return n;
}

interface Setup {
  chain: QuorumChain;
  outcomes: ConsensusOutcome[];
  mismatches: string[];
  warnings: Array<{ msg: string; fields: unknown }>;
  log: Logger;
}

function chainOf(nodes: Node[], quorum: Partial<QuorumConfig>, timeoutMs = 3000): Setup {
  const outcomes: ConsensusOutcome[] = [];
  const mismatches: string[] = [];
  const warnings: Setup['warnings'] = [];
  const upstreams = nodes.map((n) => createHttpUpstream({ url: n.url, name: n.name }));
  t.teardown(() => {
    for (const u of upstreams) u.close();
  });
  const chain = {
    config: {
      slug: 'q',
      upstreams: nodes.map((n) => ({ name: n.name })),
      consistency: {
        quorum: { methods: ['eth_getBalance', 'eth_call'], nodes: 3, agree: 2, on_mismatch: 'majority', eject_after: 3, ...quorum },
      },
    },
    upstreams,
    // Draws take the first node in rotation not yet asked: node 0, then 1, then 2.
    health: createChainHealth(
      upstreams.map((u) => u.label),
      { maxLagBlocks: 5, random: () => 0 },
    ),
    timeoutMs,
    metrics: {
      consensus: () => ({ call: (o: ConsensusOutcome) => outcomes.push(o), mismatch: (u: string) => mismatches.push(u) }),
    },
  } as unknown as QuorumChain;
  const log = { warn: (msg: string, fields: unknown) => warnings.push({ msg, fields }) } as unknown as Logger;
  return { chain, outcomes, mismatches, warnings, log };
}

type Heard =
  | { kind: 'whole'; json: { id: unknown; result?: unknown; error?: unknown } }
  | { kind: 'failed'; reason: string; upstream?: string };

/** One eth_getBalance asked of the chain's quorum, with what its sink heard. */
function ask(s: Setup, method = 'eth_getBalance'): Promise<Heard> {
  const row = methodRow(method)!;
  const q = quorumOf(s.chain, row);
  if (q === null) throw new Error(`${method} is not the quorum's`);
  return new Promise((resolve) => {
    const sink = {
      failedUpstream: undefined as string | undefined,
      whole: (body: Buffer) => resolve({ kind: 'whole', json: JSON.parse(body.toString()) }),
      begin() {},
      chunk: () => true,
      end() {},
      fail(_started: boolean, reason: string, _failure?: ForwardFailure) {
        resolve({ kind: 'failed', reason, ...(sink.failedUpstream !== undefined ? { upstream: sink.failedUpstream } : {}) });
      },
    };
    quorumCall(s.chain, q, row, '["0x0000000000000000000000000000000000000001","latest"]', '"c1"', sink, null, s.log);
  });
}

const A = { result: '0x64' };
const B = { result: '0x65' };

t.test('only the methods listed, never a write nor eth_blockNumber, each decided once', async (t) => {
  const n = await node(t, 'n0', () => A);
  const s = chainOf([n, n, n], { methods: ['eth_get*', 'eth_sendRawTransaction', 'eth_blockNumber'] });
  t.not(quorumOf(s.chain, methodRow('eth_getBalance')!), null, 'a listed prefix');
  t.equal(quorumOf(s.chain, methodRow('eth_call')!), null, 'a method not listed');
  t.equal(quorumOf(s.chain, methodRow('eth_sendRawTransaction')!), null, 'a write is never asked of several nodes');
  t.equal(quorumOf(s.chain, methodRow('eth_blockNumber')!), null, 'eth_blockNumber follows the head');
  t.equal(quorumOf(s.chain, methodRow('eth_getBalance')!), quorumOf(s.chain, methodRow('eth_getBalance')!), 'the same decision, kept');
  const none = chainOf([n], { methods: [] });
  t.equal(quorumOf(none.chain, methodRow('eth_getBalance')!), null, 'no quorum without methods');
});

t.test('answered as soon as two agree; the third is not waited for, and its late answer is still compared', async (t) => {
  const late = await node(t, 'n2', () => 'hang');
  const nodes = [await node(t, 'n0', () => A), await node(t, 'n1', () => A), late];
  const s = chainOf(nodes, {});
  const heard = await ask(s);
  t.same(heard, { kind: 'whole', json: { jsonrpc: '2.0', id: 'c1', result: '0x64' } }, "the agreed answer, with the client's id");
  t.same(s.outcomes, ['agreed']);
  t.same(
    nodes.map((n) => n.calls),
    [1, 1, 1],
    'each node was asked once, at once',
  );
  const health = s.chain.health.upstreams;
  t.equal(health[2]!.inflight, 1, 'the silent node is still asked: cancelling would cost its socket');
  t.equal(late.dropped, 0);
  t.same(s.mismatches, [], 'a node that has not answered did not disagree');
});

t.test('a late answer that differs from the one served is counted against its node', async (t) => {
  const nodes = [await node(t, 'n0', () => A), await node(t, 'n1', () => A), await node(t, 'n2', () => ({ ...B, afterMs: 150 }))];
  const s = chainOf(nodes, {});
  const heard = await ask(s);
  t.same(heard.kind === 'whole' && heard.json.result, '0x64');
  t.same(s.mismatches, [], 'answered before the third spoke');
  await waitFor(() => s.mismatches.length === 1, { what: "the late node's answer to be compared" });
  t.same(s.mismatches, ['n2']);
  t.same(
    s.chain.health.upstreams.map((u) => [u.inflight, u.status().calls]),
    [
      [0, 1],
      [0, 1],
      [0, 1],
    ],
    'every attempt counted in its node',
  );
});

t.test('a client that leaves cancels every attempt still open, counted against no node', async (t) => {
  const nodes = [await node(t, 'n0', () => A), await node(t, 'n1', () => 'hang'), await node(t, 'n2', () => 'hang')];
  const s = chainOf(nodes, {});
  const row = methodRow('eth_getBalance')!;
  let heard = 0;
  const sink = { whole: () => heard++, begin() {}, chunk: () => true, end() {}, fail: () => heard++ };
  const call = quorumCall(s.chain, quorumOf(s.chain, row)!, row, '["0x01","latest"]', '1', sink, null, s.log);
  await waitFor(() => nodes.every((n) => n.calls === 1) && s.chain.health.upstreams[0]!.inflight === 0, {
    what: 'every node asked, the first answered',
  });
  call.abort();
  await waitFor(() => nodes[1]!.dropped === 1 && nodes[2]!.dropped === 1, { what: 'the silent nodes’ calls dropped' });
  t.equal(heard, 0, 'nothing reaches the client that left');
  t.same(
    s.chain.health.upstreams.map((u) => [u.inflight, u.status().calls]),
    [
      [0, 1],
      [0, 0],
      [0, 0],
    ],
  );
  t.same(s.outcomes, [], 'an abandoned call has no outcome');
});

t.test('a node that answers otherwise is counted and logged by name, and the agreed answer served', async (t) => {
  const nodes = [await node(t, 'n0', () => A), await node(t, 'n1', () => B), await node(t, 'n2', () => ({ ...A, afterMs: 30 }))];
  const s = chainOf(nodes, {});
  const heard = await ask(s);
  t.same(heard.kind === 'whole' && heard.json.result, '0x64');
  t.same(s.outcomes, ['agreed']);
  t.same(s.mismatches, ['n1']);
  t.same(s.warnings[0]?.fields, { chain: 'q', method: 'eth_getBalance', upstream: 'n1' });
  t.notMatch(JSON.stringify(s.warnings), /0x65|0x64/, 'the log never holds the answers');
});

t.test('objects compare with their keys in any order; errors by code and message, not data', async (t) => {
  let turn = 0;
  const shapes = [
    { a: '0x1', b: ['0x2', { c: null, d: true }] },
    { b: ['0x2', { d: true, c: null }], a: '0x1' },
  ];
  const nodes = [
    await node(t, 'n0', () => ({ result: shapes[0] })),
    await node(t, 'n1', () => ({ result: shapes[1] })),
    await node(t, 'n2', () => B),
  ];
  const s = chainOf(nodes, {});
  const heard = await ask(s, 'eth_call');
  t.same(heard.kind === 'whole' && heard.json.result, shapes[0], 'the first agreeing answer');
  const reverted = (data: string) => ({ error: { code: 3, message: 'execution reverted', data } });
  const errs = [
    await node(t, 'e0', () => reverted(`0x0${turn++}`)),
    await node(t, 'e1', () => reverted('0xff')),
    await node(t, 'e2', () => 'hang'),
  ];
  const e = chainOf(errs, {});
  const err = await ask(e, 'eth_call');
  t.same(
    err.kind === 'whole' && err.json.error,
    { code: 3, message: 'execution reverted', data: '0x00' },
    "a node's error agreed on is its answer",
  );
  t.same(e.outcomes, ['agreed']);
});

t.test('on_mismatch: majority serves what more nodes said; a tie, or error, answers no_quorum', async (t) => {
  const twoToOne = [await node(t, 'n0', () => A), await node(t, 'n1', () => B), await node(t, 'n2', () => A)];
  const majority = chainOf(twoToOne, { agree: 3 });
  const served = await ask(majority);
  t.same(served.kind === 'whole' && served.json.result, '0x64', 'two against one');
  t.same(majority.outcomes, ['majority']);
  t.same(majority.mismatches, ['n1']);

  const strict = chainOf(twoToOne, { agree: 3, on_mismatch: 'error' });
  const refused = await ask(strict);
  t.same(refused, { kind: 'failed', reason: 'nodes disagreed on the answer', upstream: QUORUM_LABEL });
  t.same(quorumFailure((refused as { reason: string }).reason), { message: undefined }, "the client gets no_quorum's own message");
  t.same(strict.outcomes, ['disagreed']);
  t.same(strict.mismatches, [], 'no answer served: nobody disagreed with it');

  const tie = chainOf([await node(t, 't0', () => A), await node(t, 't1', () => B), await node(t, 't2', () => ({ result: '0x66' }))], {});
  t.same(await ask(tie), { kind: 'failed', reason: 'nodes disagreed on the answer', upstream: QUORUM_LABEL }, 'three answers, one each');
  t.same(tie.outcomes, ['disagreed']);
});

t.test('a node that disagrees eject_after times in a row leaves rotation until its next good probe', async (t) => {
  let bad = true;
  const nodes = [
    await node(t, 'n0', () => A),
    await node(t, 'n1', () => (bad ? B : A)),
    await node(t, 'n2', () => ({ ...A, afterMs: 20 })),
  ];
  const s = chainOf(nodes, { eject_after: 3 });
  const n1 = s.chain.health.upstreams[1]!;
  for (const i of [1, 2]) {
    await ask(s);
    t.equal(n1.failing, false, `in rotation after ${i} disagreements`);
  }
  bad = false;
  await ask(s);
  bad = true;
  t.same(s.mismatches, ['n1', 'n1'], 'an agreeing answer in between');
  await ask(s);
  await ask(s);
  t.equal(n1.failing, false, 'the streak started again');
  await ask(s);
  t.equal(n1.failing, true, 'three in a row: out');
  t.match(s.warnings.at(-1), { msg: /out of rotation/, fields: { upstream: 'n1', in_a_row: 3 } });
  const before = nodes[1]!.calls;
  const heard = await ask(s);
  t.same(heard.kind === 'whole' && heard.json.result, '0x64', 'the two left still agree');
  t.equal(nodes[1]!.calls, before, 'the ejected node is not asked');
  n1.reportProbe(10, 1);
  t.equal(n1.failing, false, 'back at its next good probe');
});

t.test('a node that fails is replaced by one not asked yet; with none, too few answers is no_quorum', async (t) => {
  const nodes = [
    await node(t, 'n0', () => 'reset'),
    await node(t, 'n1', () => A),
    await node(t, 'n2', () => B),
    await node(t, 'n3', () => A),
  ];
  const s = chainOf(nodes, {});
  const heard = await ask(s);
  t.same(heard.kind === 'whole' && heard.json.result, '0x64', 'the fourth node made the two');
  t.equal(nodes[3]!.calls, 1, 'asked in place of the one that failed');
  t.same(s.mismatches, ['n2']);

  const lone = chainOf([await node(t, 'l0', () => A), await node(t, 'l1', () => 'reset'), await node(t, 'l2', () => 'reset')], {});
  t.same(await ask(lone), { kind: 'failed', reason: 'fewer nodes answered than consistency.quorum.agree', upstream: QUORUM_LABEL });
  t.same(lone.outcomes, ['too_few']);

  const dead = chainOf([await node(t, 'd0', () => 'reset'), await node(t, 'd1', () => 'reset')], { nodes: 2 });
  const failed = await ask(dead);
  t.equal(failed.kind, 'failed');
  t.equal(quorumFailure((failed as { reason: string }).reason), null, 'no answer at all: a node failure, upstream_error');
  t.match((failed as { upstream: string }).upstream, /^d[01]$/, 'naming the last node that failed');
  t.same(dead.outcomes, ['failed']);
});

t.test('fewer nodes in rotation than agree: no_quorum at once, no node asked', async (t) => {
  const nodes = [await node(t, 'n0', () => A), await node(t, 'n1', () => A), await node(t, 'n2', () => A)];
  const s = chainOf(nodes, {});
  s.chain.health.upstreams[0]!.eject();
  s.chain.health.upstreams[1]!.eject();
  t.same(await ask(s), { kind: 'failed', reason: 'fewer nodes in rotation than consistency.quorum.agree', upstream: QUORUM_LABEL });
  t.same(
    nodes.map((n) => n.calls),
    [0, 0, 0],
  );
  t.same(s.outcomes, ['too_few']);
  t.match(quorumFailure('fewer nodes in rotation than consistency.quorum.agree'), { message: /Too few nodes in rotation/ });
});

t.test('answers over QUORUM_ANSWER_BYTES are not compared', async (t) => {
  const big = { bytes: QUORUM_ANSWER_BYTES + 2 };
  const s = chainOf([await node(t, 'n0', () => big), await node(t, 'n1', () => big), await node(t, 'n2', () => big)], {});
  const heard = await ask(s);
  t.same(heard, {
    kind: 'failed',
    reason: `an answer is larger than the ${QUORUM_ANSWER_BYTES} bytes a quorum compares`,
    upstream: QUORUM_LABEL,
  });
  t.match(quorumFailure((heard as { reason: string }).reason), { message: /larger than the 1048576 bytes/ });
  t.same(s.outcomes, ['too_large']);
  // Under the limit, a streamed answer (over the 64 KiB held whole by the forwarded call) is compared as any.
  const mid = { bytes: 200_000 };
  const ok = chainOf([await node(t, 'm0', () => mid), await node(t, 'm1', () => mid), await node(t, 'm2', () => 'hang')], {});
  const served = await ask(ok);
  t.equal(served.kind === 'whole' && (served.json.result as string).length, 200_002, 'streamed answers agreed on');
});
