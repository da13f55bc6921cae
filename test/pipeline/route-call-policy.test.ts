/**
 * routeCall under a failover policy (config chains.<slug>.failover), over stand-in nodes whose answers are
 * scripted: retries beyond one, each on a node not tried yet; retry_on; backoff within the client's deadline;
 * hedges after a fixed delay, several of them, or none; a per-method policy over the chain's. The policy
 * arithmetic (quantiles, overlay) runs on fake clocks in test/chain/failover-policies.test.ts.
 */
import t from 'tap';
import { performance } from 'node:perf_hooks';
import { ChainFailover } from '../../src/chain/failover-policies.js';
import { loadConfigText } from '../../src/config/load.js';
import { methodRow } from '../../src/jsonrpc/methods.js';
import type { AnswerSink, ForwardFailure } from '../../src/pipeline/forward.js';
import { routeCall, type RoutedChain } from '../../src/pipeline/route-call.js';
import * as traced from '../../src/pipeline/tracing.js';
import type { HttpUpstream, RequestHandle, ResponseSink, UpstreamRequest } from '../../src/upstreams/http-client.js';
import { createChainHealth } from '../../src/upstreams/selection.js';
import { UpstreamError } from '../../src/upstreams/upstream-error.js';

/** What a node does with a call: answer after some ms, answer an HTTP status, fail to connect, or hang. */
type Act = { ok: number } | { status: number } | 'refuse' | 'hang';

interface Node extends HttpUpstream {
  /** When each call arrived (performance.now) and its answer deadline as sent. */
  readonly arrivals: Array<{ at: number; answerTimeoutMs: number | undefined }>;
  aborted: number;
}

function node(label: string, act: Act): Node {
  const self: Node = {
    label,
    arrivals: [],
    aborted: 0,
    request(req: UpstreamRequest, sink: ResponseSink): RequestHandle {
      self.arrivals.push({ at: performance.now(), answerTimeoutMs: req.answerTimeoutMs });
      const call = JSON.parse(String(req.body)) as { id: number };
      let live = true;
      const settle = (fn: () => void) => () => {
        if (!live) return;
        live = false;
        fn();
      };
      let timer: ReturnType<typeof setTimeout> | undefined;
      if (act === 'refuse')
        timer = setTimeout(
          settle(() => sink.onError(new UpstreamError('connect', `${label}: refused`))),
          1,
        );
      else if (act === 'hang') timer = setTimeout(() => {}, 60_000);
      else if ('status' in act)
        timer = setTimeout(
          settle(() => {
            sink.onHead(act.status, [], 0);
            sink.onEnd();
          }),
          1,
        );
      else
        timer = setTimeout(
          settle(() => {
            const text = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: call.id, result: label }));
            sink.onHead(200, [], text.length);
            sink.onData(text);
            sink.onEnd();
          }),
          act.ok,
        );
      const abort = (): void => {
        if (live) self.aborted++;
        live = false;
        clearTimeout(timer);
      };
      return { abort, resume() {}, distrust: abort };
    },
    stats: () => ({ open: 0, busy: 0, queued: 0 }),
    close() {},
  };
  return self;
}

/** A chain of `nodes` under `failover` (YAML, indented under the key); selection takes the first untried node. */
function chainOf(nodes: Node[], failover: string, timeoutS = 2): RoutedChain {
  const yaml = `chains:\n  dev:\n    chain_id: 1\n    timeout_s: ${timeoutS}\n    failover:\n${failover
    .trim()
    .split('\n')
    .map((l) => `      ${l}`)
    .join('\n')}\n    upstreams: [{ url: "http://127.0.0.1:1" }]\n`;
  const r = loadConfigText(yaml);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  const c = r.config.chains.dev!;
  const health = createChainHealth(
    nodes.map((n) => n.label),
    { maxLagBlocks: 5, random: () => 0 },
  );
  const failoverOf = new ChainFailover(c.failover, c.timeout_s * 1000, c.answer_timeout_s * 1000, health.now);
  return { upstreams: nodes, health, timeoutMs: c.timeout_s * 1000, freshHead: () => null, noteWrite() {}, failover: failoverOf };
}

interface Outcome {
  result?: string;
  reason?: string;
  failure?: ForwardFailure;
  at: number;
}

function route(chain: RoutedChain, method = 'eth_getBalance', params: unknown[] = ['0x' + '11'.repeat(20), 'latest']): Promise<Outcome> {
  return new Promise((resolve) => {
    const sink: AnswerSink = {
      whole: (body) => resolve({ result: (JSON.parse(body.toString()) as { result: string }).result, at: performance.now() }),
      begin() {},
      chunk: () => true,
      end() {},
      fail: (_s, reason, failure) => resolve({ reason, ...(failure ? { failure } : {}), at: performance.now() }),
    };
    routeCall(chain, methodRow(method)!, JSON.stringify(params), '1', sink);
  });
}

t.test('retries: 3 tries three more nodes, each one not tried yet', async (t) => {
  const nodes = [node('a', 'refuse'), node('b', { status: 503 }), node('c', { status: 429 }), node('d', { ok: 1 })];
  t.match(await route(chainOf(nodes, 'retries: 3')), { result: 'd' });
  t.same(
    nodes.map((n) => n.arrivals.length),
    [1, 1, 1, 1],
  );
  const two = [node('a', 'refuse'), node('b', 'refuse'), node('c', { ok: 1 })];
  t.match(await route(chainOf(two, '{}')), { reason: /refused/ }, 'the built-in policy: one retry only');
  t.equal(two[2]!.arrivals.length, 0);
});

t.test('retry_on: an outcome left out is answered as it came', async (t) => {
  const nodes = [node('a', { status: 503 }), node('b', { ok: 1 })];
  const out = await route(chainOf(nodes, 'retry_on: [transport, "429"]'));
  t.same(out.failure, { kind: 'status', status: 503, retryAfterMs: null });
  t.equal(nodes[1]!.arrivals.length, 0, 'a 5xx is not retried');
  const refused = [node('a', 'refuse'), node('b', { ok: 1 })];
  t.match(await route(chainOf(refused, 'retry_on: [transport]')), { result: 'b' });
  const none = [node('a', 'refuse'), node('b', { ok: 1 })];
  t.match(await route(chainOf(none, 'retries: 0\nhedge: { max: 0 }')), { reason: /refused/ }, 'retries 0');
});

t.test('backoff_ms: the retry waits, and none starts when the wait leaves too little of the deadline', async (t) => {
  const nodes = [node('a', 'refuse'), node('b', { ok: 1 })];
  await route(chainOf(nodes, 'backoff_ms: 150'));
  const gap = nodes[1]!.arrivals[0]!.at - nodes[0]!.arrivals[0]!.at;
  t.ok(gap >= 145, `the retry went out ${gap.toFixed(0)} ms after the first`);
  const late = [node('a', 'refuse'), node('b', { ok: 1 })];
  const started = performance.now();
  const out = await route(chainOf(late, 'backoff_ms: 950', 1));
  t.match(out, { reason: /refused/ }, 'a 1 s deadline leaves no room for 950 ms and a retry');
  t.ok(out.at - started < 500, 'answered at once, not after the backoff');
  t.equal(late[1]!.arrivals.length, 0);
});

t.test('hedge: after a fixed delay, up to max, the first answer wins and the others are cancelled', async (t) => {
  const nodes = [node('a', 'hang'), node('b', 'hang'), node('c', { ok: 1 })];
  const out = await route(chainOf(nodes, 'hedge: { after: 60ms, max: 2 }'));
  t.equal(out.result, 'c');
  const a = nodes[0]!.arrivals[0]!.at;
  const b = nodes[1]!.arrivals[0]!.at - a;
  const c = nodes[2]!.arrivals[0]!.at - a;
  t.ok(b >= 55 && b < 1000, `the first hedge after ${b.toFixed(0)} ms`);
  t.ok(c - b >= 55, `the second ${(c - b).toFixed(0)} ms after it`);
  t.equal(nodes[0]!.aborted + nodes[1]!.aborted, 2, 'the silent attempts are cancelled');
});

t.test('a hedge after a reload turned tracing off: its attempt is noted without a tracer', async (t) => {
  const config = { otlp_endpoint: 'http://127.0.0.1:9/v1/traces', sample_ratio: 1, service_name: 'chaingate' };
  traced.startTracing(config);
  t.teardown(() => traced.stopTracing());
  const nodes = [node('a', 'hang'), node('b', { ok: 1 })];
  const call: traced.TracedCall = { span: undefined };
  traced.tracing!.beginCall(call, 'eth_getBalance', performance.now());
  // The call starts traced (its Failover keeps the call's trace), then tracing is turned off before its hedge.
  const answer = route(chainOf(nodes, 'hedge: { after: 60ms, max: 1 }'));
  traced.tracing!.leave();
  traced.reloadTracing({ ...config, otlp_endpoint: undefined });
  t.equal(traced.tracing, null, 'tracing is off');
  t.equal((await answer).result, 'b', 'the hedge went 60 ms later, and answered');
  t.equal(call.span?.attempts.map((a) => a.kind).join(','), 'first,hedge', 'both attempts noted on the call');
});

t.test('hedge off: a slow node is waited for, past half the timeout', async (t) => {
  const nodes = [node('a', { ok: 800 }), node('b', { ok: 1 })];
  t.match(await route(chainOf(nodes, 'hedge: { after: "off" }', 1)), { result: 'a' });
  t.equal(nodes[1]!.arrivals.length, 0, 'no hedge (the built-in one would go at 500 ms)');
});

t.test('a method policy over the chain one: eth_getLogs waits, eth_getBalance is hedged', async (t) => {
  const failover = `hedge: { after: 50ms }
methods:
  eth_getLogs: { timeout_s: 5, answer_timeout_s: 20, hedge: { after: "off" } }`;
  const nodes = [node('a', { ok: 300 }), node('b', { ok: 1 })];
  const chain = chainOf(nodes, failover);
  t.match(await route(chain), { result: 'b' }, 'eth_getBalance: hedged after 50 ms, the hedge answers first');
  t.equal(nodes[1]!.arrivals[0]!.answerTimeoutMs, undefined, "the chain's answer deadline: not sent again");
  const logs = await route(chain, 'eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x2' }]);
  t.equal(logs.result, 'a', 'eth_getLogs: no hedge, the slow node answers');
  t.equal(nodes[1]!.arrivals.length, 1);
  t.equal(nodes[0]!.arrivals[1]!.answerTimeoutMs, 20_000, 'its own answer deadline goes with the request');
});
