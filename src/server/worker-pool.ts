/**
 * The worker threads of one gateway process (config server.workers): each runs its own uWS app on the one
 * port (SO_REUSEPORT, the kernel spreads connections), while the main thread keeps what must exist once (the
 * ledger's writer, each chain's prober, head and upstream subscriptions, the filters, the metrics listener).
 *
 * A worker that dies is made again with the same number: its clients lost their connections and reconnect,
 * the others are not disturbed. Each worker gets a fresh set of ports (one per concern) from `connect`, and
 * the main side of each concern drops what the dead worker held when its port closes.
 */
import { availableParallelism } from 'node:os';
import { MessageChannel, type MessagePort, type Transferable, Worker } from 'node:worker_threads';
import type { Logger } from '../log.js';
import { errorText } from '../log.js';

/** Options that hook the module loader: each takes a value, given in the same argument (`--import=x`) or the next. */
const LOADER_HOOKS = ['--import', '--require', '-r', '--loader', '--experimental-loader'];

/**
 * V8 options the daemon may be started with (the systemd unit and `npm start` pass
 * --max-semi-space-size=8). They are process-wide: a Worker given one in `execArgv` throws
 * ERR_WORKER_INVALID_EXEC_ARGV, and its isolate gets V8's settings anyway.
 */
const V8_OPTIONS = ['--max-semi-space-size', '--max-old-space-size', '--stack-size'];

/**
 * The main thread's Node options, less its module-loader hooks and V8 options, for the workers. A worker
 * inherits them all by default, but it runs the compiled daemon only: a hook the main thread was started
 * with (a test runner's, a TypeScript loader) would run again in every worker and make each start several
 * times slower; and a V8 option listed explicitly would make the Worker refuse to start.
 */
export function workerExecArgv(execArgv: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!;
    if (LOADER_HOOKS.includes(arg)) i++;
    else if (![...LOADER_HOOKS, ...V8_OPTIONS].some((option) => arg === option || arg.startsWith(`${option}=`))) kept.push(arg);
  }
  return kept;
}
const WORKER_EXEC_ARGV = workerExecArgv(process.execArgv);

/** What one worker is started with, besides its number: plain data, shared memory and ports. */
export interface WorkerStart {
  data: Record<string, unknown>;
  transfer: Transferable[];
}

/** A message from a worker's control port. */
export type WorkerReport =
  | { type: 'ready' }
  | { type: 'failed'; error: string }
  | { type: 'stopped'; cut: number }
  | { type: 'reply'; id: number; value: unknown };

export interface WorkerPoolOptions {
  /** The worker script (server/worker-thread.ts, compiled). */
  script: URL;
  count: number;
  log: Logger;
  /** How long a worker asked to stop may take before it is terminated, in ms. */
  stopGraceMs: number;
  /** The ports and data of worker `index` (1-based): called at each start and restart. */
  connect(index: number): WorkerStart;
  /** A worker thread ended, for whatever reason (its Worker.threadId). */
  onExit(threadId: number): void;
  /** A worker died and is started again (chaingate_worker_restarts_total). */
  onRestart(index: number): void;
}

export interface WorkerPool {
  readonly count: number;
  /** Starts every worker; resolves once each listens, rejects (all stopped) with the first failure. */
  start(): Promise<void>;
  /** Asks each worker `message` (its control port) and resolves with every reply, in worker order. */
  ask(message: Record<string, unknown>): Promise<unknown[]>;
  /**
   * A fault drill (and the tests'): worker `index` throws an uncaught error, as a bug in it would, and so
   * dies and is started again.
   */
  crash(index: number): void;
  /** Graceful stop of every worker (each drains as a single gateway does); resolves with requests cut short. */
  stop(): Promise<number>;
}

/** server.workers resolved: `auto` is the cores this process may use. */
export function workerCount(setting: number | 'auto'): number {
  return setting === 'auto' ? availableParallelism() : setting;
}

interface Running {
  worker: Worker;
  control: MessagePort;
  /** Replies awaited, by request id. */
  waiting: Map<number, (value: unknown) => void>;
}

export function createWorkerPool(opts: WorkerPoolOptions): WorkerPool {
  const running: Array<Running | null> = Array.from({ length: opts.count }, () => null);
  let stopping = false;
  let nextId = 1;

  /** Starts worker `index` and resolves once it listens; rejects when it failed to. */
  function launch(index: number): Promise<void> {
    const { data, transfer } = opts.connect(index);
    const { port1: control, port2: workerControl } = new MessageChannel();
    const worker = new Worker(opts.script, {
      execArgv: WORKER_EXEC_ARGV,
      workerData: { ...data, index, control: workerControl },
      transferList: [...transfer, workerControl],
    });
    const entry: Running = { worker, control, waiting: new Map() };
    running[index - 1] = entry;
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      control.on('message', (m: WorkerReport) => {
        if (m.type === 'ready') {
          ready = true;
          resolve();
        } else if (m.type === 'failed') reject(new Error(`worker ${index}: ${m.error}`));
        else if (m.type === 'reply') {
          const done = entry.waiting.get(m.id);
          entry.waiting.delete(m.id);
          done?.(m.value);
        } else if (m.type === 'stopped') {
          const done = entry.waiting.get(0);
          entry.waiting.delete(0);
          done?.(m.cut);
        }
      });
      worker.on('error', (err) => {
        opts.log.error('worker failed', { worker: index, error: String(err.message ?? err) });
        if (!ready) reject(err);
      });
      const threadId = worker.threadId;
      worker.on('exit', (code) => {
        opts.onExit(threadId);
        control.close();
        for (const done of entry.waiting.values()) done(undefined);
        entry.waiting.clear();
        if (running[index - 1] === entry) running[index - 1] = null;
        if (!ready || stopping) return;
        opts.log.error('worker died; starting it again', { worker: index, exit_code: code });
        opts.onRestart(index);
        launch(index).then(
          () => opts.log.info('worker restarted', { worker: index }),
          (err: unknown) => opts.log.error('worker restart failed', { worker: index, error: errorText(err) }),
        );
      });
    });
  }

  function ask(entry: Running, message: Record<string, unknown>): Promise<unknown> {
    const id = nextId++;
    return new Promise((resolve) => {
      entry.waiting.set(id, resolve);
      entry.control.postMessage({ ...message, id });
    });
  }

  return {
    count: opts.count,
    async start() {
      try {
        await Promise.all(running.map((_, i) => launch(i + 1)));
      } catch (err) {
        stopping = true;
        await Promise.all(running.map((r) => r?.worker.terminate()));
        throw err;
      }
    },
    crash(index) {
      running[index - 1]?.control.postMessage({ type: 'crash' });
    },
    ask: (message) => Promise.all(running.map((r) => (r === null ? Promise.resolve(undefined) : ask(r, message)))),
    async stop() {
      stopping = true;
      const cuts = await Promise.all(
        running.map(async (r, i) => {
          if (r === null) return 0;
          const exited = new Promise<void>((resolve) => r.worker.once('exit', () => resolve()));
          const stopped = new Promise<unknown>((resolve) => {
            r.waiting.set(0, resolve);
            r.control.postMessage({ type: 'stop' });
          });
          let timer: NodeJS.Timeout | undefined;
          const late = new Promise<'late'>((resolve) => {
            timer = setTimeout(() => resolve('late'), opts.stopGraceMs);
          });
          // A stopped worker has closed its sockets and ends by itself. Terminating one whose uWS sockets are
          // still open aborts the whole process (Node checks that a worker's loop is empty as it ends it), so
          // that is only the last resort.
          const cut = await Promise.race([stopped, late]);
          const ended = await Promise.race([exited, late]);
          clearTimeout(timer);
          if (ended === 'late') {
            opts.log.error('worker did not stop in time; ending it', { worker: i + 1 });
            await r.worker.terminate();
          }
          return typeof cut === 'number' ? cut : 0;
        }),
      );
      return cuts.reduce((a, b) => a + b, 0);
    },
  };
}
