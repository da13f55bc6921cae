/**
 * routeCall's choices, one at a time, over stand-in upstreams whose every answer and fault is scripted
 * (the end-to-end file test/e2e/failover.test.ts runs the same road over real anvils): what is retried and
 * what never is, the hedge against a silent node, "not there yet" answers, health accounting, the
 * eth_blockNumber shortcut, and the broadcast of a raw transaction.
 */
import t from 'tap';
import { waitFor } from '../support/wait-for.js';
import { keccak256 } from 'ethers';
import type { AnswerSink, ForwardFailure } from '../../src/pipeline/forward.js';
import { methodRow } from '../../src/jsonrpc/methods.js';
import { routeCall, type RoutedChain } from '../../src/pipeline/route-call.js';
import type { HttpUpstream, RequestHandle, ResponseSink, UpstreamErrorKind, UpstreamRequest } from '../../src/upstreams/http-client.js';
import { UpstreamError } from '../../src/upstreams/upstream-error.js';
import { SUSPECT_AFTER_MS } from '../../src/upstreams/health.js';
import { createChainHealth } from '../../src/upstreams/selection.js';

/** What a stand-in node does with one call. */
type Behaviour =
  | { result: unknown; afterMs?: number }
  | { error: { code: number; message: string }; afterMs?: number }
  | { status: number; afterMs?: number }
  | { fault: UpstreamErrorKind; afterMs?: number }
  | { streamBytes: number; thenFault?: UpstreamErrorKind }
  | 'hang';

interface StandIn extends HttpUpstream {
  /** Request bodies received, in order. */
  readonly bodies: string[];
  /** Requests dropped by the caller before they settled. */
  aborted: number;
}

function standIn(label: string, behave: (method: string) => Behaviour): StandIn {
  const self: StandIn = {
    label,
    bodies: [],
    aborted: 0,
    request(req: UpstreamRequest, sink: ResponseSink): RequestHandle {
      const body = String(req.body);
      self.bodies.push(body);
      const call = JSON.parse(body) as { id: number; method: string };
      const b = behave(call.method);
      let live = true;
      const timers: Array<ReturnType<typeof setTimeout>> = [];
      const later = (ms: number, fn: () => void): void => {
        timers.push(setTimeout(() => live && fn(), ms));
      };
      const json = (answer: object): void => {
        const text = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: call.id, ...answer }));
        sink.onHead(200, [], text.length);
        sink.onData(text);
        live = false;
        sink.onEnd();
      };
      if (b === 'hang') {
        // Never answers; holds the process open as its socket would.
        later(60_000, () => {});
      } else if ('result' in b) {
        later(b.afterMs ?? 1, () => json({ result: b.result }));
      } else if ('error' in b) {
        later(b.afterMs ?? 1, () => json({ error: b.error }));
      } else if ('status' in b) {
        later(b.afterMs ?? 1, () => {
          live = false;
          sink.onHead(b.status, [], 0);
          sink.onEnd();
        });
      } else if ('fault' in b) {
        later(b.afterMs ?? 1, () => {
          live = false;
          sink.onError(new UpstreamError(b.fault, `${label}: scripted ${b.fault}`));
        });
      } else {
        later(1, () => {
          sink.onHead(200, [], undefined);
          sink.onData(Buffer.from(`{"jsonrpc":"2.0","id":${call.id},"result":"0x`));
          sink.onData(Buffer.alloc(b.streamBytes, 0x61));
          if (b.thenFault !== undefined) {
            live = false;
            sink.onError(new UpstreamError(b.thenFault, `${label}: cut`));
          } else {
            sink.onData(Buffer.from('"}'));
            live = false;
            sink.onEnd();
          }
        });
      }
      const abort = (): void => {
        if (live) self.aborted++;
        live = false;
        for (const timer of timers) clearTimeout(timer);
      };
      return { abort, resume() {}, distrust: abort };
    },
    stats: () => ({ open: 0, busy: 0, queued: 0 }),
    close() {},
  };
  return self;
}

/** A chain over stand-ins; selection always takes the first node in rotation not yet tried. */
function chainOf(nodes: StandIn[], timeoutMs = 2000, freshHead: number | null = null): RoutedChain & { writes: number } {
  const health = createChainHealth(
    nodes.map((n) => n.label),
    { maxLagBlocks: 5, random: () => 0 },
  );
  const chain = {
    upstreams: nodes,
    health,
    timeoutMs,
    writes: 0,
    freshHead: () => freshHead,
    noteWrite() {
      chain.writes++;
    },
  };
  return chain;
}

interface Outcome {
  kind: 'whole' | 'streamed' | 'cut' | 'failed';
  body: string;
  reason?: string;
  failure?: ForwardFailure;
  failedUpstream?: string;
}

/** Routes one call and resolves with what the client would get. */
function route(
  chain: RoutedChain,
  method: string,
  params: unknown[] = [],
  idText = '"client-id"',
): { done: Promise<Outcome>; abort(): void } {
  let resolve!: (o: Outcome) => void;
  const done = new Promise<Outcome>((r) => (resolve = r));
  const parts: Buffer[] = [];
  const sink: AnswerSink & { failedUpstream?: string } = {
    whole: (body) => resolve({ kind: 'whole', body: body.toString() }),
    begin() {},
    chunk(buf) {
      parts.push(buf);
      return true;
    },
    end: () => resolve({ kind: 'streamed', body: Buffer.concat(parts).toString() }),
    fail(started, reason, failure) {
      resolve({
        kind: started ? 'cut' : 'failed',
        body: '',
        reason,
        ...(failure ? { failure } : {}),
        ...(sink.failedUpstream !== undefined ? { failedUpstream: sink.failedUpstream } : {}),
      });
    },
  };
  const call = routeCall(chain, methodRow(method)!, JSON.stringify(params), idText, sink);
  return { done, abort: () => call.abort() };
}

const sentMethods = (n: StandIn): string[] => n.bodies.map((b) => (JSON.parse(b) as { method: string }).method);
const BALANCE = ['0x' + '11'.repeat(20), 'latest'];

t.test('a node that cannot be reached is retried once on another, never on a third', async (t) => {
  const nodes = ['a', 'b', 'c'].map((l) => standIn(l, () => ({ fault: 'connect' })));
  const chain = chainOf(nodes);
  const r = await route(chain, 'eth_getBalance', BALANCE).done;
  t.match(r, { kind: 'failed', failure: { kind: 'connect' }, failedUpstream: 'b' });
  t.same(
    nodes.map((n) => n.bodies.length),
    [1, 1, 0],
    'a, then b, and no third attempt',
  );
  t.same(
    chain.health.upstreams.map((u) => [u.inflight, u.status().calls, u.errorRate()]),
    [
      [0, 1, 1],
      [0, 1, 1],
      [0, 0, 0],
    ],
    'each failure counted once',
  );
});

t.test('every retriable failure moves the call; a node error answer does not', async (t) => {
  const cases: Array<[string, Behaviour, boolean]> = [
    ['timeout', { fault: 'timeout' }, true],
    ['reset', { fault: 'reset' }, true],
    ['garbled HTTP', { fault: 'protocol' }, true],
    ['HTTP 500', { status: 500 }, true],
    ['HTTP 503', { status: 503 }, true],
    ['HTTP 429', { status: 429 }, true],
    ['HTTP 404', { status: 404 }, false],
    ['execution reverted', { error: { code: 3, message: 'execution reverted' } }, false],
  ];
  for (const [what, behaviour, moved] of cases) {
    const a = standIn('a', () => behaviour);
    const b = standIn('b', () => ({ result: '0x2a' }));
    const r = await route(chainOf([a, b]), 'eth_call', [{ to: '0x' + '22'.repeat(20) }, 'latest']).done;
    if (moved)
      t.same(r, { kind: 'whole', body: '{"jsonrpc":"2.0","id":"client-id","result":"0x2a"}' }, `${what}: answered by the other node`);
    else t.notMatch(r.body, /0x2a/, `${what}: not moved`);
    t.equal(b.bodies.length, moved ? 1 : 0, `${what}: ${moved ? 'one' : 'no'} call to the other node`);
  }
});

t.test('calls whose repetition has an effect are never sent twice', async (t) => {
  for (const method of ['eth_newFilter', 'eth_newBlockFilter', 'eth_getFilterChanges', 'eth_uninstallFilter']) {
    const nodes = ['a', 'b'].map((l) => standIn(l, () => ({ fault: 'reset' })));
    const r = await route(chainOf(nodes), method, method === 'eth_newFilter' ? [{}] : method === 'eth_newBlockFilter' ? [] : ['0x1']).done;
    t.equal(r.kind, 'failed', method);
    t.equal(nodes[0]!.bodies.length + nodes[1]!.bodies.length, 1, `${method}: sent once`);
  }
});

t.test('a failure after the answer began is never retried: the client answer is cut', async (t) => {
  const a = standIn('a', () => ({ streamBytes: 100_000, thenFault: 'reset' }));
  const b = standIn('b', () => ({ result: '0x1' }));
  const r = await route(chainOf([a, b]), 'eth_getLogs', [{}]).done;
  t.match(r, { kind: 'cut', failedUpstream: 'a' });
  t.equal(b.bodies.length, 0);
  const whole = await route(chainOf([standIn('a', () => ({ streamBytes: 100_000 })), b]), 'eth_getLogs', [{}]).done;
  t.equal(whole.kind, 'streamed', 'a large answer streams through');
  t.ok(whole.body.startsWith('{"jsonrpc":"2.0","id":"client-id","result":"0xaaaa'), 'with the client id');
});

t.test('"not there yet" answers are retried once; when the retry fails the first answer is given', async (t) => {
  const notThere = { error: { code: -32000, message: 'header not found' } };
  const behind = standIn('behind', () => notThere);
  const ahead = standIn('ahead', () => ({ result: '0x64' }));
  t.same(
    await route(chainOf([behind, ahead]), 'eth_getBalance', BALANCE).done,
    {
      kind: 'whole',
      body: '{"jsonrpc":"2.0","id":"client-id","result":"0x64"}',
    },
    'the node ahead answers',
  );

  const dead = standIn('dead', () => ({ fault: 'connect' }));
  t.same(
    await route(chainOf([standIn('behind', () => notThere), dead]), 'eth_getBalance', BALANCE).done,
    {
      kind: 'whole',
      body: '{"jsonrpc":"2.0","id":"client-id","error":{"code":-32000,"message":"header not found"}}',
    },
    'the first answer when the other node fails',
  );

  const both = [standIn('x', () => notThere), standIn('y', () => notThere), standIn('z', () => ({ result: '0x1' }))];
  const r = await route(chainOf(both), 'eth_getBalance', BALANCE).done;
  t.match(r.body, /header not found/, 'one retry only: the third node is not asked');
  t.equal(both[2]!.bodies.length, 0);

  const reverted = [standIn('x', () => ({ error: { code: -32000, message: 'nonce too low' } })), standIn('y', () => ({ result: '0x1' }))];
  await route(chainOf(reverted), 'eth_getBalance', BALANCE).done;
  t.equal(reverted[1]!.bodies.length, 0, 'other node errors are answers, passed on as they are');
});

t.test('a silent node gets a second attempt beside it after half the deadline; the first answer wins', async (t) => {
  const silent = standIn('silent', () => 'hang');
  const fine = standIn('fine', () => ({ result: '0x7', afterMs: 5 }));
  const chain = chainOf([silent, fine], 400);
  const started = Date.now();
  const r = await route(chain, 'eth_getBalance', BALANCE).done;
  const took = Date.now() - started;
  t.same(r, { kind: 'whole', body: '{"jsonrpc":"2.0","id":"client-id","result":"0x7"}' });
  t.ok(took >= 190 && took < 390, `answered after the hedge at 200 ms, before the 400 ms deadline (${took} ms)`);
  t.equal(silent.aborted, 1, 'the silent attempt is dropped');
  t.same(
    chain.health.upstreams.map((u) => [u.inflight, u.status().calls]),
    [
      [0, 0],
      [0, 1],
    ],
    'the dropped attempt is counted neither way',
  );

  // The first attempt answering after the hedge started still wins, and the hedge is dropped.
  const slow = standIn('slow', () => ({ result: '0x1', afterMs: 250 }));
  const slower = standIn('slower', () => ({ result: '0x2', afterMs: 300 }));
  const raced = await route(chainOf([slow, slower], 400), 'eth_getBalance', BALANCE).done;
  t.match(raced.body, /"result":"0x1"/);
  t.equal(slower.aborted, 1);

  // Both silent: one hedge, no third attempt; the client's abort drops both.
  const mute = [standIn('m1', () => 'hang'), standIn('m2', () => 'hang')];
  const routed = route(chainOf(mute, 300), 'eth_getBalance', BALANCE);
  // Stand-ins never time out by themselves: the upstream client would, at each attempt's own deadline.
  // Waited for rather than timed: a loaded machine may fire the hedge's timer late.
  await waitFor(() => mute[1]!.bodies.length > 0, { what: 'the hedge', ms: 5000 });
  await new Promise((r) => setTimeout(r, 200));
  t.equal(mute[1]!.bodies.length, 1, 'the hedge went to the second node, and no third attempt');
  routed.abort();
  await Promise.race([routed.done, new Promise((r) => setTimeout(r, 100))]);
  t.same(
    mute.map((m) => m.aborted),
    [1, 1],
    'an abort drops every attempt',
  );
});

t.test('a call waiting on a node that turns suspected or failing is hedged then, not at half the deadline', async (t) => {
  const turns = {
    // What the prober's late head poll does (health.ts).
    suspected: (u: RoutedChain['health']['upstreams'][number], now: number) => (u.probeSince = now - SUSPECT_AFTER_MS),
    failing: (u: RoutedChain['health']['upstreams'][number]) => {
      for (let k = 0; k < 3; k++) u.record('failed', 1);
    },
  };
  for (const [how, turn] of Object.entries(turns)) {
    const silent = standIn('silent', () => 'hang');
    const fine = standIn('fine', () => ({ result: '0x7', afterMs: 5 }));
    const chain = chainOf([silent, fine], 4000);
    const started = Date.now();
    const routed = route(chain, 'eth_getBalance', BALANCE);
    setTimeout(() => turn(chain.health.upstreams[0]!, chain.health.now()), 300);
    const r = await routed.done;
    const took = Date.now() - started;
    t.same(r, { kind: 'whole', body: '{"jsonrpc":"2.0","id":"client-id","result":"0x7"}' }, `${how}: answered by the other node`);
    t.equal(silent.bodies.length, 1, `${how}: the call had gone to the silent node`);
    t.equal(silent.aborted, 1, `${how}: and is dropped there`);
    t.ok(took >= 300 && took < 1500, `${how} at 300 ms: answered after ${took} ms, well before the hedge at half (2 s)`);
  }

  // Every node suspected: they are slow alike, and the hedge waits for half the deadline as before.
  const slowNodes = [standIn('s1', () => 'hang'), standIn('s2', () => ({ result: '0x9', afterMs: 5 }))];
  const allSuspected = chainOf(slowNodes, 1600);
  const begun = Date.now();
  const slowCall = route(allSuspected, 'eth_getBalance', BALANCE);
  setTimeout(() => {
    for (const u of allSuspected.health.upstreams) turns.suspected(u, allSuspected.health.now());
  }, 100);
  t.match((await slowCall.done).body, /"result":"0x9"/);
  const waited = Date.now() - begun;
  t.ok(waited >= 790, `every node suspected: hedged at half the deadline (800 ms), after ${waited} ms`);

  // A call made while a node is suspected does not go to it at all.
  const silent = standIn('silent', () => 'hang');
  const fine = standIn('fine', () => ({ result: '0x8' }));
  const chain = chainOf([silent, fine], 4000);
  turns.suspected(chain.health.upstreams[0]!, chain.health.now());
  t.same(await route(chain, 'eth_getBalance', BALANCE).done, { kind: 'whole', body: '{"jsonrpc":"2.0","id":"client-id","result":"0x8"}' });
  t.equal(silent.bodies.length, 0, 'the suspected node was not asked');
});

t.test('no upstream in rotation: the call fails at once and no node is asked', async (t) => {
  const nodes = ['a', 'b'].map((l) => standIn(l, () => ({ result: '0x1' })));
  const chain = chainOf(nodes);
  for (const u of chain.health.upstreams) for (let k = 0; k < 3; k++) u.record('failed', 1);
  const r = await route(chain, 'eth_getBalance', BALANCE).done;
  t.match(r, { kind: 'failed', reason: 'no healthy upstream', failedUpstream: 'none-in-rotation' });
  t.same(
    nodes.map((n) => n.bodies.length),
    [0, 0],
  );
  const tx = await route(chain, 'eth_sendRawTransaction', ['0x02']).done;
  t.match(tx, { kind: 'failed', reason: 'no healthy upstream' }, 'a transaction too');
});

t.test('eth_blockNumber: from a fresh head without a node, else forwarded and its answer noted as the head', async (t) => {
  const node = standIn('a', () => ({ result: '0x10' }));
  t.same(await route(chainOf([node], 2000, 0x20), 'eth_blockNumber', [], '7').done, {
    kind: 'whole',
    body: '{"jsonrpc":"2.0","id":7,"result":"0x20"}',
  });
  t.equal(node.bodies.length, 0, 'no node asked');
  const chain = chainOf([node]);
  t.same(await route(chain, 'eth_blockNumber', [], '8').done, { kind: 'whole', body: '{"jsonrpc":"2.0","id":8,"result":"0x10"}' });
  t.equal(chain.health.upstreams[0]!.head, 16, "the answer is the node's head");
});

t.test('a client that leaves drops its attempts and hears nothing more', async (t) => {
  const node = standIn('a', () => ({ result: '0x1', afterMs: 50 }));
  const chain = chainOf([node]);
  const routed = route(chain, 'eth_getBalance', BALANCE);
  routed.abort();
  const r = await Promise.race([routed.done, new Promise((r) => setTimeout(() => r('silence'), 100))]);
  t.equal(r, 'silence');
  t.equal(node.aborted, 1);
  t.equal(chain.health.upstreams[0]!.inflight, 0);
  // An answer given without a node is not delivered after an abort either.
  const local = route(chainOf([node], 2000, 5), 'eth_blockNumber');
  local.abort();
  t.equal(await Promise.race([local.done, new Promise((r) => setTimeout(() => r('silence'), 20))]), 'silence');
});

t.test('eth_sendRawTransaction: once to every node in rotation, first acceptance answers', async (t) => {
  const RAW = '0x02f86d827a6980843b9aca008502540be400825208940000000000000000000000000000000000dead0180c0';
  const accept = standIn('accept', () => ({ result: '0xabc', afterMs: 30 }));
  const reject = standIn('reject', () => ({ error: { code: -32000, message: 'nonce too low' } }));
  const out = standIn('out', () => ({ result: '0xabc' }));
  const chain = chainOf([reject, accept, out]);
  for (let k = 0; k < 3; k++) chain.health.upstreams[2]!.record('failed', 1);
  const r = await route(chain, 'eth_sendRawTransaction', [RAW], '1').done;
  t.same(r, { kind: 'whole', body: '{"jsonrpc":"2.0","id":1,"result":"0xabc"}' }, 'the acceptance, though the rejection came first');
  t.same(
    [reject, accept, out].map((n) => sentMethods(n)),
    [['eth_sendRawTransaction'], ['eth_sendRawTransaction'], []],
    'once each, none to the node out of rotation',
  );
  t.equal(chain.writes, 1, 'the write is noted (heads known before it may be stale)');

  // Only "already known": the hash of the raw bytes is the answer.
  const known = chainOf([
    standIn('k', () => ({ error: { code: -32000, message: 'already known' } })),
    standIn('f', () => ({ fault: 'reset' })),
  ]);
  const k = await route(known, 'eth_sendRawTransaction', [RAW], '2').done;
  t.same(k, { kind: 'whole', body: `{"jsonrpc":"2.0","id":2,"result":"${keccak256(RAW)}"}` });

  // No JSON-RPC answer at all: the call fails, with the first failure, and is not sent again.
  const failing = [standIn('x', () => ({ fault: 'reset' })), standIn('y', () => ({ status: 502, afterMs: 20 }))];
  const f = await route(chainOf(failing), 'eth_sendRawTransaction', [RAW], '3').done;
  t.match(f, { kind: 'failed', failure: { kind: 'reset' }, failedUpstream: 'x' });
  t.same(
    failing.map((n) => n.bodies.length),
    [1, 1],
  );
});
