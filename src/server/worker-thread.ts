/**
 * The script of one worker thread (server/worker-pool.ts starts it): a gateway that serves connections on the
 * main port beside the other workers, sharing with the main thread what `WorkerLink` carries. It answers its
 * control port: stop (drain as a single gateway does), reload, metrics, stream stats.
 */
import { type MessagePort, workerData } from 'node:worker_threads';
import type { Config } from '../config/schema.js';
import { createForwardingLogger, type LogRecord, errorText } from '../log.js';
import { startGateway } from './app.js';
import type { WorkerLink } from './worker-link.js';

interface WorkerData {
  index: number;
  control: MessagePort;
  log: MessagePort;
  config: Config;
  port: number;
  ca?: string | Buffer;
  link: WorkerLink;
}

const data = workerData as WorkerData;
const log = createForwardingLogger('debug', (record: LogRecord) => data.log.postMessage(record));
const reply = (id: number, value: unknown): void => data.control.postMessage({ type: 'reply', id, value });

startGateway(data.config, {
  log,
  port: data.port,
  worker: { ...data.link, index: data.index, forward: (record) => data.log.postMessage(record) },
  ...(data.ca !== undefined ? { ca: data.ca } : {}),
}).then(
  (gateway) => {
    data.control.on('message', (m: { type: string; id: number; config?: Config }) => {
      switch (m.type) {
        case 'stop':
          gateway.stop().then((cut) => {
            data.control.postMessage({ type: 'stopped', cut });
            data.control.close();
            data.log.close();
          });
          return;
        case 'reload':
          gateway.reload(m.config!).then(
            () => reply(m.id, null),
            (err: unknown) => reply(m.id, errorText(err)),
          );
          return;
        case 'metrics':
          gateway.context.metrics.values().then((values) => reply(m.id, values));
          return;
        case 'stats':
          gateway.streamStats().then((stats) => reply(m.id, stats));
          return;
        case 'traffic':
          reply(m.id, gateway.traffic());
          return;
        case 'crash':
          setImmediate(() => {
            throw new Error('crash drill (WorkerPool.crash)');
          });
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
      gateway.stop().then(() => {
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
