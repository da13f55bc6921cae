/**
 * routeCall and the block a call is about (issue 32 §2), over stand-in upstreams at chosen heads: every attempt
 * goes to a node that has reached the call's minHead, and a `"result":null` for a method whose null means "not
 * found" (eRPC's "retry empty"), like a "not there yet" error, is asked once more of another node that has reached
 * the block (for a call by hash, of a node further ahead, else of any other), and of none when no such node is in
 * rotation. The end-to-end file
 * test/e2e/consistent-reads.test.ts runs the same road over real anvils mined apart.
 */
import t from 'tap';
import { methodRow } from '../../src/jsonrpc/methods.js';
import type { AnswerSink } from '../../src/pipeline/forward.js';
import { isNullResult } from '../../src/pipeline/answer-looks.js';
import { type RoutedChain, routeCall } from '../../src/pipeline/route-call.js';
import { createChainHealth } from '../../src/upstreams/selection.js';
import { type StandInNode, standInNode } from '../support/stand-in-node.js';

/** A chain over stand-ins at these heads; selection takes the first candidate (random 0). */
function chainAt(nodes: StandInNode[], heads: number[]): RoutedChain {
  const health = createChainHealth(
    nodes.map((n) => n.label),
    { maxLagBlocks: 5, random: () => 0 },
  );
  heads.forEach((head, i) => {
    health.upstreams[i]!.reportHead(head);
  });
  return { upstreams: nodes, health, timeoutMs: 2000, freshHead: () => null, noteWrite() {} };
}

/** Routes one call with `minHead` and resolves with the whole answer's body (or the failure's reason). */
function route(chain: RoutedChain, method: string, params: unknown[], minHead: number | null): Promise<string> {
  return new Promise((resolve) => {
    const sink: AnswerSink = {
      whole: (body) => resolve(body.toString()),
      begin() {},
      chunk: () => true,
      end() {},
      fail: (_started, reason) => resolve(`failed: ${reason}`),
    };
    routeCall(chain, methodRow(method)!, JSON.stringify(params), '1', sink, null, minHead);
  });
}

const NULL = { result: null };
const BLOCK = { result: { number: '0x64', hash: `0x${'cd'.repeat(32)}` } };
const HASH = `0x${'ab'.repeat(32)}`;
const NOT_THERE = { error: { code: -32000, message: 'header not found' } };
const answered = (n: StandInNode): number => n.methods.length;

t.test('every attempt goes to a node that has reached the minimum head', async (t) => {
  const behind = standInNode('behind', { result: '0x1' });
  const ahead = standInNode('ahead', { result: '0x2' });
  t.equal(
    await route(chainAt([behind, ahead], [98, 100]), 'eth_getBalance', ['0x' + '11'.repeat(20), '0x64'], 100),
    '{"jsonrpc":"2.0","id":1,"result":"0x2"}',
  );
  t.equal(answered(behind), 0, 'the node behind is not asked');

  const down = standInNode('down', 'unreachable');
  const other = standInNode('other', { result: '0x3' });
  const late = standInNode('late', { result: '0x4' });
  const body = await route(chainAt([down, late, other], [100, 97, 100]), 'eth_getBalance', ['0x' + '11'.repeat(20), 'latest'], 100);
  t.match(body, /"0x3"/, 'after a failure, the other node at the head');
  t.equal(answered(late), 0, 'not the one behind');
});

t.test('retry empty: a null for a block is asked once more of another node that has reached it', async (t) => {
  const first = standInNode('first', NULL);
  const further = standInNode('further', BLOCK);
  t.match(await route(chainAt([first, further], [100, 101]), 'eth_getBlockByNumber', ['0x64', false], 100), /"number":"0x64"/);
  t.same([answered(first), answered(further)], [1, 1]);

  const even = standInNode('even', BLOCK);
  const alone = standInNode('alone', NULL);
  t.match(
    await route(chainAt([alone, even], [100, 100]), 'eth_getBlockByNumber', ['0x64', false], 100),
    /"number":"0x64"/,
    'another node that has reached the block is asked too, even at the same head (the first may be a balancer)',
  );
  t.same([answered(alone), answered(even)], [1, 1]);

  const behind = standInNode('behind', BLOCK);
  const lone = standInNode('lone', NULL);
  t.equal(
    await route(chainAt([lone, behind], [100, 99]), 'eth_getBlockByNumber', ['0x64', false], 100),
    '{"jsonrpc":"2.0","id":1,"result":null}',
    'no other node has reached the block: the null is the answer',
  );
  t.equal(answered(behind), 0, 'a node below the block is not asked');

  const nulls = [standInNode('n1', NULL), standInNode('n2', NULL), standInNode('n3', BLOCK)];
  t.equal(
    await route(chainAt(nulls, [100, 101, 102]), 'eth_getBlockByNumber', ['0x64', false], 100),
    '{"jsonrpc":"2.0","id":1,"result":null}',
    'the retry says null too: the client gets null',
  );
  t.same(nulls.map(answered), [1, 1, 0], 'one retry only');
});

t.test('retry empty: a call by hash goes to a node further ahead, else to any other', async (t) => {
  const first = standInNode('first', NULL);
  const behind = standInNode('behind', { result: { transactionHash: HASH, blockNumber: '0x5' } });
  t.match(await route(chainAt([first, behind], [100, 97]), 'eth_getTransactionReceipt', [HASH], null), /"blockNumber":"0x5"/);
  t.equal(answered(behind), 1, 'none ahead: the other node, behind');

  const lagging = standInNode('lagging', NULL);
  const also = standInNode('also', NULL);
  const ahead = standInNode('ahead', { result: { transactionHash: HASH, blockNumber: '0x64' } });
  t.match(await route(chainAt([lagging, also, ahead], [97, 97, 100]), 'eth_getTransactionReceipt', [HASH], null), /"0x64"/);
  t.same([lagging, also, ahead].map(answered), [1, 0, 1], 'the node ahead, not the other one behind');
});

t.test('a method whose null is an answer is not retried; a "not there yet" error goes ahead too', async (t) => {
  const first = standInNode('first', NULL);
  const other = standInNode('other', { result: '0x1' });
  t.equal(
    await route(chainAt([first, other], [100, 101]), 'eth_call', [{ to: '0x' + '22'.repeat(20) }, 'latest'], 100),
    '{"jsonrpc":"2.0","id":1,"result":null}',
  );
  t.equal(answered(other), 0, 'eth_call: null is its answer');

  const behind = standInNode('behind', NOT_THERE);
  const same = standInNode('same', { result: '0x2' });
  const ahead = standInNode('ahead', { result: '0x3' });
  const body = await route(chainAt([behind, same, ahead], [100, 100, 102]), 'eth_getBalance', ['0x' + '11'.repeat(20), '0x64'], 100);
  t.match(body, /"0x3"/, 'the node ahead of the first');
  t.equal(answered(same), 0);
});

t.test('isNullResult reads a whole answer', async (t) => {
  t.equal(isNullResult(Buffer.from('{"jsonrpc":"2.0","id":1,"result":null}')), true);
  t.equal(isNullResult(Buffer.from('{"jsonrpc":"2.0","result":null,"id":"abc"}')), true);
  t.equal(isNullResult(Buffer.from('{"jsonrpc":"2.0","id":1,"result":"null"}')), false);
  t.equal(isNullResult(Buffer.from('{"jsonrpc":"2.0","id":1,"result":{"x":null}}')), false);
  t.equal(isNullResult(Buffer.from('{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}')), false);
  t.equal(isNullResult(Buffer.from(`{"jsonrpc":"2.0","id":1,"result":"0x${'ab'.repeat(300)}"}`)), false);
});
