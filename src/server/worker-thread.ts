/**
 * The script of one worker thread (server/worker-pool.ts starts it): a gateway that serves connections on the
 * main port beside the other workers, sharing with the main thread what `WorkerLink` carries. It answers its
 * control port: stop (drain as a single gateway does), reload, metrics, stream stats.
 */
import { getHeapStatistics } from 'node:v8';
import { type MessagePort, workerData } from 'node:worker_threads';
import type { Config } from '../config/schema.js';
import { createForwardingLogger, type LogRecord, errorText } from '../log.js';
import { type Gateway, startGateway } from './app.js';
import type { WorkerLink } from './worker-link.js';
import type { WorkerFault } from './worker-pool.js';
import { ABANDON_HOOK } from './worker-rescue.js';
import { BEAT_MS, beater } from './worker-watch.js';

interface WorkerData {
  index: number;
  control: MessagePort;
  log: MessagePort;
  config: Config;
  port: number;
  ca?: string | Buffer;
  link: WorkerLink;
  /** Where this worker beats (worker-watch.ts). */
  beats: SharedArrayBuffer;
  /** server.worker_max_heap_mb, in bytes. */
  heapBytes: number;
}

const data = workerData as WorkerData;
const log = createForwardingLogger('debug', (record: LogRecord) => data.log.postMessage(record));
const reply = (id: number, value: unknown): void => data.control.postMessage({ type: 'reply', id, value });

/**
 * A thread ended with uWS sockets open aborts the whole process (worker-rescue.ts says why), so whatever
 * ends this one first ships its usage rows and closes every socket: process.exit() here (a library's, a
 * drill's), the heap guard below, and the main thread's inspector when this thread is stuck (the hook).
 */
let gateway: Gateway | null = null;
const abandon = (): boolean => {
  gateway?.abandon();
  return true;
};
(globalThis as Record<symbol, unknown>)[Symbol.for(ABANDON_HOOK)] = abandon;
const exit = process.exit.bind(process);
process.exit = ((code?: number) => {
  abandon();
  return exit(code);
}) as typeof process.exit;

// The heartbeat the main thread watches, and the heap guard (server.worker_max_heap_mb) at each beat.
const beat = beater(data.beats, data.index);
setInterval(() => {
  beat();
  const used = getHeapStatistics().used_heap_size;
  if (used <= data.heapBytes) return;
  log.error('worker over its heap limit; closing its connections', {
    worker: data.index,
    heap_mb: Math.round(used / 2 ** 20),
    limit_mb: Math.round(data.heapBytes / 2 ** 20),
  });
  process.exit(1);
}, BEAT_MS).unref();

/** What a drill (WorkerPool.crash) makes this worker do. */
function drill(fault: WorkerFault): void {
  if (fault === 'exit') process.exit(3);
  else if (fault === 'hang') {
    // A thread that never goes back to its event loop, as in an endless loop (asleep, so it burns no core).
    const cell = new Int32Array(new SharedArrayBuffer(4));
    for (;;) Atomics.wait(cell, 0, 0, 1000);
  } else if (fault === 'leak') {
    const hoard: number[][] = [];
    setInterval(() => hoard.push(new Array<number>(1 << 17).fill(hoard.length)), 5);
  } else throw new Error('crash drill (WorkerPool.crash)');
}

startGateway(data.config, {
  log,
  port: data.port,
  worker: { ...data.link, index: data.index, forward: (record) => data.log.postMessage(record) },
  ...(data.ca !== undefined ? { ca: data.ca } : {}),
}).then(
  (started) => {
    gateway = started;
    data.control.on('message', (m: { type: string; id: number; config?: Config; fault?: WorkerFault }) => {
      switch (m.type) {
        case 'stop':
          started.stop().then((cut) => {
            data.control.postMessage({ type: 'stopped', cut });
            data.control.close();
            data.log.close();
          });
          return;
        case 'reload':
          started.reload(m.config!).then(
            () => reply(m.id, null),
            (err: unknown) => reply(m.id, errorText(err)),
          );
          return;
        case 'metrics':
          started.context.metrics.values().then((values) => reply(m.id, values));
          return;
        case 'stats':
          started.streamStats().then((stats) => reply(m.id, stats));
          return;
        case 'traffic':
          reply(m.id, started.traffic());
          return;
        case 'crash':
          setImmediate(() => drill(m.fault ?? 'throw'));
          return;
      }
    });
    // A worker that fails closes its connections (their clients reconnect, to the other workers meanwhile) and
    // ends with code 1, so the main thread starts it again. It must close them itself: a worker ended with
    // uWS sockets open takes the whole process down.
    let failed = false;
    const fail = (err: unknown): void => {
      if (failed) return;
      failed = true;
      log.error('worker failed; closing its connections', { worker: data.index, error: String((err as Error).stack ?? err) });
      process.exitCode = 1;
      started.stop().then(() => {
        data.control.close();
        data.log.close();
      });
    };
    process.on('uncaughtException', fail);
    process.on('unhandledRejection', fail);
    data.control.postMessage({ type: 'ready' });
  },
  (err: unknown) => {
    data.control.postMessage({ type: 'failed', error: errorText(err) });
  },
);
