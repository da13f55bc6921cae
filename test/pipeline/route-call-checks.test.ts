/**
 * routeCall's one hook for the gateway's answer checks (chain/answer-checks.ts), over stand-in nodes that answer
 * a fixed result: a failed check moves the call to another node and counts as a failure in the first one's
 * health; with no other node the call fails with FAILED_CHECK_REASON; a suspect answer is kept while another node
 * is asked, and served when none is better. The checks themselves are test/chain/answer-checks.test.ts's.
 */
import t from 'tap';
import { createAnswerChecks, FAILED_CHECK_REASON } from '../../src/chain/answer-checks.js';
import type { ChainConfig } from '../../src/config/schema.js';
import { methodRow } from '../../src/jsonrpc/methods.js';
import type { CheckName, UpstreamMetrics } from '../../src/metrics/registry.js';
import type { AnswerSink, ForwardFailure } from '../../src/pipeline/forward.js';
import { routeCall, type RoutedChain } from '../../src/pipeline/route-call.js';
import type { HttpUpstream } from '../../src/upstreams/http-client.js';
import { createChainHealth } from '../../src/upstreams/selection.js';
import { type StandInNode, standInNode } from '../support/stand-in-node.js';

const hash = (n: number): string => `0x${n.toString(16).padStart(64, '0')}`;
const FORGED = `0x${'f0'.repeat(32)}`;

/** A node answering every call with `result`; `calls` counts them. */
function node(label: string, result: unknown): StandInNode & { readonly calls: number } {
  const n = standInNode(label, { result });
  return Object.defineProperty(n, 'calls', { get: () => n.methods.length }) as StandInNode & { readonly calls: number };
}

/** A chain over `nodes` with answer checks knowing blocks 1..5 (whose blooms hold anything); selection takes the first untried node. */
function chainOf(nodes: HttpUpstream[]): { chain: RoutedChain; failures: Array<[number, CheckName]> } {
  const failures: Array<[number, CheckName]> = [];
  const health = createChainHealth(
    nodes.map((n) => n.label),
    { maxLagBlocks: 5, random: () => 0 },
  );
  const config = { slug: 'dev', kind: 'evm', consistency: { checks: true }, upstreams: nodes.map((n) => ({ name: n.label })) };
  const meters = nodes.map((_, i) => ({ checkFailed: (check: CheckName) => failures.push([i, check]) }) as unknown as UpstreamMetrics);
  const checks = createAnswerChecks(config as unknown as ChainConfig, { feeds: null, meters, now: () => 0 })!;
  for (let n = 1; n <= 5; n++) checks.known.add(n, hash(n), hash(n - 1), `0x${'ff'.repeat(256)}`);
  t.teardown(() => checks.close());
  return { chain: { upstreams: nodes, health, timeoutMs: 2000, freshHead: () => null, noteWrite() {}, checks }, failures };
}

interface Outcome {
  body?: unknown;
  reason?: string;
  failure?: ForwardFailure;
}

function route(chain: RoutedChain, method: string, params: unknown[]): Promise<Outcome> {
  return new Promise((resolve) => {
    const sink: AnswerSink = {
      whole: (body) => resolve({ body: (JSON.parse(body.toString()) as { result: unknown }).result }),
      begin() {},
      chunk: () => true,
      end() {},
      fail: (_started, reason, failure) => resolve({ reason, ...(failure ? { failure } : {}) }),
    };
    routeCall(chain, methodRow(method)!, JSON.stringify(params), '1', sink);
  });
}

const block = (h: string): Record<string, string> => ({ number: '0x3', hash: h });

t.test('a failed check moves the call to another node and counts in the first one’s health', async (t) => {
  const a = node('a', block(FORGED));
  const b = node('b', block(hash(3)));
  const { chain, failures } = chainOf([a, b]);
  t.same(await route(chain, 'eth_getBlockByNumber', ['0x3', false]), { body: block(hash(3)) }, 'the true block, from b');
  t.same(failures, [[0, 'block']]);
  t.same(
    chain.health.upstreams.map((u) => [u.inflight, u.status().calls, u.errorRate()]),
    [
      [0, 1, 1],
      [0, 1, 0],
    ],
    'a failed, b answered',
  );
});

t.test('with no other node, the call fails as invalid: the answer never reaches the client', async (t) => {
  const { chain, failures } = chainOf([node('a', block(FORGED))]);
  t.same(await route(chain, 'eth_getBlockByNumber', ['0x3', false]), { reason: FAILED_CHECK_REASON, failure: { kind: 'invalid' } });
  t.same(failures, [[0, 'block']]);

  const two = chainOf([node('a', block(FORGED)), node('b', block(`0x${'dd'.repeat(32)}`))]);
  t.same(
    await route(two.chain, 'eth_getBlockByNumber', ['0x3', false]),
    { reason: FAILED_CHECK_REASON, failure: { kind: 'invalid' } },
    'nor does another wrong one',
  );
  t.same(two.failures, [
    [0, 'block'],
    [1, 'block'],
  ]);
});

t.test('a suspect answer is kept while another node is asked', async (t) => {
  const log = (n: number): Record<string, unknown> => ({
    blockNumber: `0x${n.toString(16)}`,
    blockHash: hash(n),
    address: `0x${'11'.repeat(20)}`,
    topics: [],
  });
  const range = [{ fromBlock: '0x2', toBlock: '0x3' }];
  const { chain, failures } = chainOf([node('a', [log(2)]), node('b', [log(2), log(3)])]);
  t.same(await route(chain, 'eth_getLogs', range), { body: [log(2), log(3)] }, "b's answer, with block 3's log");
  t.same(failures, [[0, 'logs_bloom']], 'a left it out');

  const alone = chainOf([node('a', [log(2)])]);
  t.same(await route(alone.chain, 'eth_getLogs', range), { body: [log(2)] }, 'alone, the suspect answer is served');
  t.same(alone.failures, []);
});

t.test('a method not checked is never judged', async (t) => {
  const a = node('a', block(FORGED));
  const { chain, failures } = chainOf([a]);
  t.same(await route(chain, 'eth_getBalance', [`0x${'11'.repeat(20)}`, 'latest']), { body: block(FORGED) });
  t.same(failures, []);
  t.equal(a.calls, 1);
});
