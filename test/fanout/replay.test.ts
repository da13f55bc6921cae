/**
 * replay.ts's steps with a fake node: the resume point read off eth_subscribe's params, the bound on heads, and
 * the seam between the replay and the live notifications held meanwhile (none twice, a gap fetched first).
 */
import t from 'tap';
import { RecentHeads } from '../../src/fanout/recent-heads.js';
import { type Replay, replayEnd, replayThen, resumePoint } from '../../src/fanout/replay.js';

const hex = (n: number): string => `0x${n.toString(16)}`;
const head = (n: number, branch = 'a'): Record<string, unknown> => ({
  number: hex(n),
  hash: `0x${branch}${n}`,
  parentHash: `0x${branch}${n - 1}`,
});
const log = (n: number, i = 0): Record<string, unknown> => ({
  blockNumber: hex(n),
  blockHash: `0xa${n}`,
  logIndex: hex(i),
  removed: false,
});

/** A node that answers eth_blockNumber, eth_getBlockByNumber and eth_getLogs from `chain` (block numbers up to `tip`). */
function fakeNode(tip: number, logs: Array<Record<string, unknown>> = []) {
  const calls: string[] = [];
  return {
    calls,
    maxBlocks: 10,
    async call(method: string, params: unknown[]): Promise<unknown> {
      calls.push(method);
      if (method === 'eth_blockNumber') return hex(tip);
      if (method === 'eth_getBlockByNumber') {
        const n = parseInt(params[0] as string, 16);
        return n <= tip ? { ...head(n), transactions: [], size: '0x1' } : null;
      }
      const f = params[0] as { fromBlock: string; toBlock: string };
      return logs.filter((l) => {
        const n = parseInt(l.blockNumber as string, 16);
        return n >= parseInt(f.fromBlock, 16) && n <= parseInt(f.toBlock, 16);
      });
    },
  };
}

function replayOf(kind: 'newHeads' | 'logs', from: number, upTo: number, source: ReturnType<typeof fakeNode>, buffer: unknown[]) {
  const sent: Array<Record<string, unknown>> = [];
  const r: Replay = {
    kind,
    from,
    upTo,
    filter: {},
    source,
    heads: new RecentHeads(10),
    buffer: buffer.map((b) => JSON.stringify(b)),
    send(json) {
      sent.push(JSON.parse(json) as Record<string, unknown>);
      return true;
    },
  };
  return { r, sent };
}

t.test('resume points', async (t) => {
  t.same(resumePoint('newHeads', undefined), { live: undefined, from: null });
  t.same(resumePoint('newHeads', { fromBlock: '0x1f' }), { live: undefined, from: 31 });
  t.same(resumePoint('newHeads', { fromBlock: 'latest' }), { live: undefined, from: null });
  t.same(
    resumePoint('logs', { address: '0x1', fromBlock: '0x2' }),
    { live: { address: '0x1' }, from: 2 },
    'the live topic has no fromBlock',
  );
  t.same(resumePoint('logs', { address: '0x1' }), { live: { address: '0x1' }, from: null });
  t.match(resumePoint('logs', { fromBlock: 'earliest' }), { refused: /must be a block number/ });
  t.same(resumePoint('newPendingTransactions', true), { live: true, from: null });
});

t.test('the bound on heads, and logs past it', async (t) => {
  const node = fakeNode(100);
  const memory = new RecentHeads(10);
  t.same(await replayEnd('newHeads', 91, memory, node), { upTo: 100 }, '10 blocks: at the bound');
  t.match(await replayEnd('newHeads', 90, memory, node), {
    ok: false,
    invalid: true,
    reason: /subscriptions\.replay_blocks.*0x5b at the oldest/,
  });
  t.same(await replayEnd('logs', 3, memory, node), { upTo: 100 }, 'logs are fetched however far back');
});

t.test('heads: the replay, then the buffer without the heads it sent, a gap fetched first, a reorg passed', async (t) => {
  const node = fakeNode(20);
  // Live heads held during the replay: 14 and 15 were sent by it too; 18 comes after a gap (16, 17); then a
  // reorg at 18.
  const { r, sent } = replayOf('newHeads', 12, 15, node, [head(14), head(15), head(18), head(18, 'b')]);
  let live = false;
  await replayThen(
    r,
    () => (live = true),
    () => t.fail('no failure'),
  );
  t.same(
    sent.map((h) => `${parseInt(h.number as string, 16)}${(h.hash as string).slice(2, 3)}`),
    ['12a', '13a', '14a', '15a', '16a', '17a', '18a', '18b'],
  );
  t.notOk('transactions' in sent[0]!, 'a fetched block is sent as a head');
  t.ok(live, 'then live');
});

t.test("logs: the replay, then the buffer without the logs it sent; the earlier logs of a live log's block fetched", async (t) => {
  const chain = [log(5), log(7), log(9, 0), log(9, 1), log(10)];
  const node = fakeNode(10, chain);
  // The replay reaches 8; the live log 9/1 is held, 9/0 went out live before the subscription was registered.
  const { r, sent } = replayOf('logs', 5, 8, node, [log(9, 1), log(10), { ...log(10), removed: true }]);
  await replayThen(
    r,
    () => {},
    () => t.fail('no failure'),
  );
  t.same(
    sent.map((l) => `${parseInt(l.blockNumber as string, 16)}/${parseInt(l.logIndex as string, 16)}${l.removed ? 'x' : ''}`),
    ['5/0', '7/0', '9/0', '9/1', '10/0', '10/0x'],
  );
});

t.test('a subscriber that went away ends the replay; a node that fails it is reported', async (t) => {
  const node = fakeNode(20);
  const { r } = replayOf('newHeads', 12, 15, node, []);
  let goneLive = false;
  await replayThen(
    { ...r, send: () => false },
    () => (goneLive = true),
    () => t.fail('not a failure'),
  );
  t.notOk(goneLive, 'never live');
  const broken = { ...node, call: async () => Promise.reject(new Error('node down')) };
  const { r: r2 } = replayOf('newHeads', 12, 15, broken, []);
  let reason = '';
  await replayThen(
    r2,
    () => t.fail('not live'),
    (why) => (reason = why),
  );
  t.match(reason, /resume failed: Error: node down/);
});

t.test('logs: what the feed delivered in blocks no longer on the chain is retracted first, in block order, once', async (t) => {
  const node = fakeNode(10, [log(5), log(7)]);
  const replaced = (n: number, i = 0): Record<string, unknown> => ({ ...log(n, i), blockHash: `0xb${n}` });
  // A live retraction of 6/0 on the old branch reaches the buffer too: sent once.
  const { r, sent } = replayOf('logs', 5, 10, node, [{ ...replaced(6), removed: true }]);
  r.heads.get = () => undefined;
  r.delivered = async () => [
    { number: 3, hash: '0xb3', logs: [] },
    { number: 5, hash: '0xa5', logs: [JSON.stringify(log(5))] }, // still on the chain: not retracted
    { number: 6, hash: '0xb6', logs: [JSON.stringify(replaced(6)), JSON.stringify(replaced(6, 1))] },
    { number: 12, hash: '0xb12', logs: [JSON.stringify(replaced(12))] }, // past the chain's end now
  ];
  await replayThen(
    r,
    () => {},
    () => t.fail('no failure'),
  );
  t.same(
    sent.map((l) => `${parseInt(l.blockNumber as string, 16)}/${parseInt(l.logIndex as string, 16)}${l.removed ? 'x' : ''}:${l.blockHash}`),
    ['6/0x:0xb6', '6/1x:0xb6', '12/0x:0xb12', '5/0:0xa5', '7/0:0xa7'],
  );
  t.equal(node.calls.filter((c) => c === 'eth_getBlockByNumber').length, 4, "each remembered block's hash asked once");
});
