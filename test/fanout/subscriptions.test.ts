/**
 * subscriptions.ts's hub over a fake feed source and a fake node: what happens to a subscription that resumes
 * (replay.ts) while its topic is lost, and the bounds of a replay.
 */
import t from 'tap';
import { createSubscriptionHub, type FeedSource, type SubscriberConn } from '../../src/fanout/subscriptions.js';
import type { ReplaySource } from '../../src/fanout/replay.js';
import { waitFor } from '../support/wait-for.js';

const hex = (n: number): string => `0x${n.toString(16)}`;

/** A feed source whose upstream subscriptions are open at once; `lose` and `push` drive a topic's listeners. */
function fakeFeeds() {
  const listeners: Array<{ kind: string; l: { notify(json: string): void; lost(reason: string): void } }> = [];
  const feeds: FeedSource = {
    subscribe(kind, _params, l) {
      const entry = { kind, l };
      listeners.push(entry);
      return {
        remove: () => void listeners.splice(listeners.indexOf(entry), 1),
        live: () => true,
        whenLive: async () => null,
      };
    },
  };
  const of = (kind: string) => listeners.filter((e) => e.kind === kind).map((e) => e.l);
  return {
    feeds,
    lose(kind: string, reason: string) {
      for (const l of of(kind)) l.lost(reason);
    },
    push(kind: string, json: string) {
      for (const l of of(kind)) l.notify(json);
    },
  };
}

/** A connection that records what it was sent and how it was closed. */
function fakeConn() {
  const got: string[] = [];
  const closes: Array<[number, string]> = [];
  const conn: SubscriberConn & { got: string[]; closes: Array<[number, string]> } = {
    ownerId: null,
    endpointId: null,
    closed: false,
    firstSubId: null,
    firstSub: null,
    moreSubs: null,
    got,
    closes,
    deliver: (bytes) => void got.push(bytes.toString()),
    close(code, reason) {
      if (conn.closed) return;
      closes.push([code, reason]);
      (conn as { closed: boolean }).closed = true;
      hub?.dropConnection(conn);
    },
  };
  return conn;
}

let hub: ReturnType<typeof createSubscriptionHub> | undefined;

/** A node at `tip` whose eth_getLogs answers wait until `release` is called (the replay stays in progress). */
function slowNode(tip: number, logs: (from: number, to: number) => unknown[] = () => []) {
  let release: () => void = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  let getLogs = 0;
  const source: ReplaySource = {
    maxBlocks: 10,
    async call(method, params) {
      if (method === 'eth_blockNumber') return hex(tip);
      if (method === 'eth_getLogs') {
        getLogs++;
        await gate;
        const f = params[0] as { fromBlock: string; toBlock: string };
        return logs(parseInt(f.fromBlock, 16), parseInt(f.toBlock, 16));
      }
      return null;
    },
  };
  return { source, release: () => release(), getLogs: () => getLogs };
}

function hubOf(feeds: FeedSource, replay: ReplaySource) {
  hub = createSubscriptionHub({ feeds, replay, ruPerMessage: () => 0, charge: () => true, liveWaitMs: 1000 });
  return hub;
}

t.test('a topic lost while a subscription replays: that subscription is closed too, not left on a dead topic', async (t) => {
  const { feeds, lose, push } = fakeFeeds();
  const node = slowNode(20);
  const h = hubOf(feeds, node.source);
  const live = fakeConn();
  const resuming = fakeConn();
  t.ok((await h.subscribe(live, 'logs', { address: '0x1' })).ok);
  const outcome = await h.subscribe(resuming, 'logs', { address: '0x1', fromBlock: '0x5' });
  if (!outcome.ok) throw new Error(outcome.reason);
  outcome.start?.();
  await waitFor(() => node.getLogs() === 1, { what: 'the replay fetching' });
  lose('logs', 'upstream gone');
  t.same(live.closes, [[1011, 'upstream gone']], 'the live subscriber is closed');
  t.same(resuming.closes, [[1011, 'upstream gone']], 'the replaying subscriber is closed too');
  node.release();
  await new Promise((resolve) => setImmediate(resolve));
  push('logs', JSON.stringify({ blockNumber: '0x15', blockHash: '0xa', logIndex: '0x0' }));
  t.same(resuming.got, [], 'nothing reaches it after');
  t.equal(h.stats().subscriptions, 0, 'no subscription left');
});

/** A connection that queues what it is sent, closes as a slow consumer past `limit` bytes, as ws-rpc.ts does,
 *  and says when it is backed up (over half of it); `read` empties the queue. */
function queuingConn(limit: number) {
  const conn = fakeConn();
  let queued = 0;
  let waits: Array<() => void> = [];
  const backedUp = (): boolean => !conn.closed && queued > limit / 2;
  conn.deliver = (bytes) => {
    if (conn.closed) return;
    if (queued > limit) return conn.close(1008, 'slow consumer');
    queued += bytes.length;
    conn.got.push(bytes.toString());
  };
  conn.writable = () => (backedUp() ? new Promise<void>((resolve) => waits.push(resolve)) : null);
  const read = (): void => {
    queued = 0;
    const w = waits;
    waits = [];
    for (const resolve of w) resolve();
  };
  return Object.assign(conn, { read, backedUp });
}

t.test('a replay window larger than the socket may queue goes out as the client reads, not all at once', async (t) => {
  const { feeds } = fakeFeeds();
  const logs = (from: number, to: number) =>
    Array.from({ length: 200 }, (_, i) => ({
      blockNumber: hex(from),
      blockHash: `0xa${from}`,
      logIndex: hex(i),
      data: 'x'.repeat(100),
    })).filter(() => from <= 5 && to >= 5);
  const node = slowNode(20, logs);
  node.release();
  const h = hubOf(feeds, node.source);
  const conn = queuingConn(4096);
  const outcome = await h.subscribe(conn, 'logs', { address: '0x1', fromBlock: '0x5' });
  if (!outcome.ok) throw new Error(outcome.reason);
  outcome.start?.();
  // The client reads whenever the socket is backed up, a turn later.
  let reads = 0;
  await waitFor(
    () => {
      if (conn.backedUp()) {
        reads++;
        setImmediate(conn.read);
      }
      return conn.closed || conn.got.length === 200;
    },
    { what: 'the replay sent', ms: 10_000 },
  );
  t.same(conn.closes, [], 'not closed as a slow consumer');
  t.equal(conn.got.length, 200, 'every log of the window');
  t.ok(reads > 1, 'sent over several reads');
});

t.test('a replay that holds more live results than the bound is closed naming it; the live ones go on', async (t) => {
  const { feeds, push } = fakeFeeds();
  const node = slowNode(20);
  const h = hubOf(feeds, { ...node.source, maxHeld: 3 });
  const live = fakeConn();
  const resuming = fakeConn();
  t.ok((await h.subscribe(live, 'logs', { address: '0x1' })).ok);
  const outcome = await h.subscribe(resuming, 'logs', { address: '0x1', fromBlock: '0x0' });
  if (!outcome.ok) throw new Error(outcome.reason);
  outcome.start?.();
  await waitFor(() => node.getLogs() === 1, { what: 'the replay fetching' });
  const result = (n: number): string => JSON.stringify({ blockNumber: hex(21 + n), blockHash: `0xa${21 + n}`, logIndex: '0x0' });
  for (let n = 0; n < 3; n++) push('logs', result(n));
  t.same(resuming.closes, [], 'at the bound: held');
  push('logs', result(3));
  t.match(resuming.closes, [[1008, /^resume too far behind: over 3 live results held during its replay; resume from a later block$/]]);
  t.equal(live.got.length, 4, 'the live subscriber got every one');
  t.equal(h.stats().subscriptions, 1, 'only the live subscription is left');
  node.release();
});
