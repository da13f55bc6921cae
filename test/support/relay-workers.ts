/**
 * Worker threads for the relay tests: each runs, from the compiled dist/ modules (run `npx tsc -p tsconfig.json`
 * first), a SubscriptionHub over the feeds relay or an SseHub over the event relay, with clients that record the
 * bytes they are sent; the test thread drives them with ask(). The test thread plays the main thread: it serves
 * the relay's other end on the port each worker was given. Workers are terminated at teardown.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import type { Test } from 'tap';

const DIST = fileURLToPath(new URL('../../dist/fanout/', import.meta.url));

/** A worker's hub: 'feeds' = SubscriptionHub over connectFeedRelay(port).feeds('dev'); 'events' = SseHub over
 *  connectEventRelay(port).openLink('beacon'). */
export type RelayWorkerKind = 'feeds' | 'events';

export interface RelayWorker {
  readonly worker: Worker;
  /** True while the worker runs its 'block' command. */
  busy(): boolean;
  /** Sends a command and resolves with the worker's answer. */
  ask<T = unknown>(command: Record<string, unknown>): Promise<T>;
  /** Stops the thread as a crash would (its port closes). */
  terminate(): Promise<void>;
}

/** Both kinds' 'block' command: the thread runs nothing else for `ms`. */
const BUSY_FOR = `
function busyFor(_parts, { ms }) {
  const flag = new Int32Array(workerData.busy);
  Atomics.store(flag, 0, 1);
  const end = Date.now() + ms;
  while (Date.now() < end);
  Atomics.store(flag, 0, 0);
  return true;
}
`;

/** Commands of a 'feeds' worker:
 *  - {cmd:'subscribe', conns, kind, params, owner?}: that many new connections (of owner `owner`, charged per
 *    workerData.balance and price; else unmetered) each subscribe; answers
 *    {ids, failures} (the ids given, and the reasons of the subscribes that failed)
 *  - {cmd:'received'}: per connection (in creation order) {sub, results, closes}: the subscription id of each
 *    message it was sent, their results, and the closes it got
 *  - {cmd:'unsubscribeAll'}: every connection unsubscribes every id it holds
 *  - {cmd:'state'}: {upstreams, head, stats} of the relayed feeds and the hub
 *  - {cmd:'close'}: closes the relay client
 *  - {cmd:'block', ms}: keeps the thread busy for ms, as a worker that does not keep up (both kinds); it sets
 *    workerData.busy[0] to 1 while it blocks, so the test knows the relay's messages now wait */
const FEEDS_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const ready = (async () => {
  const { connectFeedRelay } = await import(workerData.dist + 'remote-feeds.js');
  const { createSubscriptionHub } = await import(workerData.dist + 'subscriptions.js');
  const client = connectFeedRelay(workerData.port);
  const feeds = client.feeds('dev');
  // With workerData.balance (an Int32 of RU shared by every worker, as the shared book is), each notification costs
  // workerData.price per subscription of owner 1, taken atomically or refused.
  const balance = workerData.balance ? new Int32Array(workerData.balance) : null;
  const charge = (_owner, _endpoint, ru) => {
    if (balance === null) return true;
    for (;;) {
      const now = Atomics.load(balance, 0);
      if (now < ru) return false;
      if (Atomics.compareExchange(balance, 0, now, now - ru) === now) return true;
    }
  };
  const hub = createSubscriptionHub({ feeds, ruPerMessage: () => workerData.price ?? 0, charge, liveWaitMs: workerData.liveWaitMs });
  const conns = [];
  return { client, feeds, hub, conns };
})();
const commands = {
  async subscribe({ hub, conns }, { conns: n, kind, params, owner }) {
    const made = [];
    for (let i = 0; i < n; i++) {
      const conn = {
        ownerId: owner ?? null, endpointId: owner ? 'ep' + owner : null, closed: false, firstSubId: null, firstSub: null, moreSubs: null,
        ids: [], messages: [], closes: [],
        deliver(bytes) { conn.messages.push(JSON.parse(bytes.toString())); },
        close(code, reason) { conn.closed = true; conn.closes.push(code + ' ' + reason); },
      };
      conns.push(conn);
      made.push(conn);
    }
    const outcomes = await Promise.all(made.map((c) => hub.subscribe(c, kind, params)));
    outcomes.forEach((o, i) => { if (o.ok) made[i].ids.push(o.id); });
    return { ids: outcomes.filter((o) => o.ok).map((o) => o.id), failures: outcomes.filter((o) => !o.ok).map((o) => o.reason) };
  },
  received({ conns }) {
    return conns.map((c) => ({
      sub: c.messages.map((m) => m.params.subscription),
      results: c.messages.map((m) => m.params.result),
      closes: c.closes,
    }));
  },
  unsubscribeAll({ hub, conns }) {
    for (const c of conns) for (const id of c.ids.splice(0)) hub.unsubscribe(c, id);
    return true;
  },
  state({ feeds, hub }) {
    return { upstreams: feeds.upstreamSubscriptions(), head: feeds.head(), stats: hub.stats() };
  },
  close({ client }) {
    client.close();
    return true;
  },
  block: busyFor,
};
${BUSY_FOR}
parentPort.on('message', async ({ seq, command }) => {
  const parts = await ready;
  parentPort.postMessage({ seq, answer: await commands[command.cmd](parts, command) });
});
`;

/** Commands of an 'events' worker (the hub's heartbeat is workerData.heartbeatMs, its open timeout openTimeoutMs):
 *  - {cmd:'add', clients, topics}: that many new clients listen to `topics`
 *  - {cmd:'received'}: per client {started, text, closedWith}: whether it was started, every byte written to it
 *    (as text, keep-alive comments included) and how it was ended
 *  - {cmd:'removeAll'}: every client leaves
 *  - {cmd:'state'}: {clients, topicsOpen} of the worker's hub */
const EVENTS_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const ready = (async () => {
  const { connectEventRelay } = await import(workerData.dist + 'event-relay.js');
  const { createSseHub } = await import(workerData.dist + 'sse-hub.js');
  const client = connectEventRelay(workerData.port);
  const hub = createSseHub({
    openLink: client.openLink('beacon'),
    heartbeatMs: workerData.heartbeatMs,
    openTimeoutMs: workerData.openTimeoutMs,
    maxBufferedBytes: 1 << 20,
  });
  return { hub, clients: [] };
})();
const commands = {
  add({ hub, clients }, { clients: n, topics }) {
    for (let i = 0; i < n; i++) {
      const c = {
        started: false, text: '', closedWith: null,
        start() { c.started = true; },
        write(bytes) { c.text += bytes.toString(); return true; },
        close(reason) { c.closedWith = reason; },
      };
      c.listener = hub.add(c, topics);
      clients.push(c);
    }
    return true;
  },
  received({ clients }) {
    return clients.map((c) => ({ started: c.started, text: c.text, closedWith: c.closedWith }));
  },
  removeAll({ clients }) {
    for (const c of clients) c.listener.remove();
    return true;
  },
  state({ hub }) {
    return { clients: hub.clients(), topicsOpen: hub.topicsOpen() };
  },
  block: busyFor,
};
${BUSY_FOR}
parentPort.on('message', async ({ seq, command }) => {
  const parts = await ready;
  parentPort.postMessage({ seq, answer: await commands[command.cmd](parts, command) });
});
`;

/**
 * Starts a worker of `kind` whose relay port's other end `serve` takes (it returns what closes that end, called
 * at teardown). `data` goes to the worker beside its port (liveWaitMs; heartbeatMs, openTimeoutMs).
 */
export function relayWorker(
  t: Test,
  kind: RelayWorkerKind,
  serve: (port: MessagePort) => { close(): void },
  data: Record<string, number | SharedArrayBuffer> = {},
): RelayWorker {
  if (!existsSync(`${DIST}remote-feeds.js`) || !existsSync(`${DIST}event-relay.js`)) {
    throw new Error('dist/ lacks the relay modules: run `npx tsc -p tsconfig.json` first');
  }
  const { port1, port2 } = new MessageChannel();
  const server = serve(port1);
  const busy = new SharedArrayBuffer(4);
  const worker = new Worker(kind === 'feeds' ? FEEDS_WORKER : EVENTS_WORKER, {
    eval: true,
    workerData: { port: port2, dist: DIST, busy, liveWaitMs: 10_000, heartbeatMs: 60_000, openTimeoutMs: 10_000, ...data },
    transferList: [port2],
  });
  const answers = new Map<number, { resolve(answer: unknown): void; reject(err: Error): void }>();
  let seq = 0;
  let failure: Error | null = null;
  worker.on('message', (msg: { seq: number; answer: unknown }) => {
    answers.get(msg.seq)?.resolve(msg.answer);
    answers.delete(msg.seq);
  });
  worker.on('error', (err) => {
    failure = err;
    for (const pending of answers.values()) pending.reject(err);
    answers.clear();
  });
  t.teardown(async () => {
    await worker.terminate();
    server.close();
  });
  return {
    worker,
    busy: () => Atomics.load(new Int32Array(busy), 0) === 1,
    ask<T>(command: Record<string, unknown>): Promise<T> {
      if (failure !== null) return Promise.reject(failure);
      const id = ++seq;
      return new Promise<T>((resolve, reject) => {
        answers.set(id, { resolve: (answer) => resolve(answer as T), reject });
        worker.postMessage({ seq: id, command });
      });
    },
    terminate: async () => {
      await worker.terminate();
    },
  };
}
