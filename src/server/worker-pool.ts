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
import { rescueWorker } from './worker-rescue.js';
import { createStallWatch, heapLimits, WATCH_MS } from './worker-watch.js';

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

/**
 * A fault drill (and the tests'): what worker `index` is made to do. `throw`: an uncaught error, as a bug
 * would; `exit`: process.exit() in it; `hang`: its thread stops running its event loop, as in an endless
 * loop; `leak`: its heap grows until it passes server.worker_max_heap_mb.
 */
export type WorkerFault = 'throw' | 'exit' | 'hang' | 'leak';

/** The answers of every worker to one question, in worker order (undefined: no answer in time). */
export interface WorkerAnswers {
  values: unknown[];
  /** The numbers of the workers that did not answer in time. */
  unanswered: number[];
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
  /** How long a worker asked to stop may take before it is ended, in ms. */
  stopGraceMs: number;
  /** How long a worker may go without a heartbeat, and how long an answer is waited for, in ms. */
  stallMs: number;
  /** server.worker_max_heap_mb. */
  maxHeapMb: number;
  /** The ports and data of worker `index` (1-based): called at each start and restart. */
  connect(index: number): WorkerStart;
  /** A worker thread ended, for whatever reason (its Worker.threadId). */
  onExit(threadId: number): void;
  /** A worker died and is started again (chaingate_worker_restarts_total). */
  onRestart(index: number): void;
  /** A worker stalled and is ended (chaingate_worker_stalls_total). */
  onStall(index: number): void;
}

export interface WorkerPool {
  readonly count: number;
  /** Starts every worker; resolves once each listens, rejects (all stopped) with the first failure. */
  start(): Promise<void>;
  /**
   * Asks each worker `message` (its control port); resolves with every reply given within `timeoutMs`
   * (default: the stall time).
   */
  ask(message: Record<string, unknown>, timeoutMs?: number): Promise<WorkerAnswers>;
  /** A fault drill (WorkerFault, `throw` by default): worker `index` fails so, and is replaced. */
  crash(index: number, fault?: WorkerFault): void;
  /** Graceful stop of every worker (each drains as a single gateway does); resolves with requests cut short. */
  stop(): Promise<number>;
}

/** server.workers resolved: `auto` is the cores this process may use. */
export function workerCount(setting: number | 'auto'): number {
  return setting === 'auto' ? availableParallelism() : setting;
}

/** How long a stuck worker gets at least to run its abandon hook (worker-rescue.ts), in ms. */
const RESCUE_MIN_MS = 5_000;

interface Running {
  index: number;
  worker: Worker;
  control: MessagePort;
  /** Replies awaited, by request id. */
  waiting: Map<number, (value: unknown) => void>;
  /** Set while it is being ended from outside (worker-rescue.ts): resolves true once it ended. */
  ending: Promise<boolean> | null;
}

/**
 * Asks one worker to stop and waits for it within `opts.stopGraceMs`; resolves with the requests it cut short.
 * A stopped worker has closed its sockets and ends by itself; a late one is ended from outside, its sockets
 * closed first (worker-rescue.ts), else the process would abort.
 */
async function stopWorker(
  r: Running,
  index: number,
  opts: Pick<WorkerPoolOptions, 'log' | 'stopGraceMs'>,
  end: (entry: Running) => Promise<boolean>,
): Promise<number> {
  const exited = new Promise<void>((resolve) => r.worker.once('exit', () => resolve()));
  const stopped = new Promise<unknown>((resolve) => {
    r.waiting.set(0, resolve);
    r.control.postMessage({ type: 'stop' });
  });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), opts.stopGraceMs);
  });
  const cut = await Promise.race([stopped, late]);
  const ended = await Promise.race([exited, late]);
  clearTimeout(timer);
  if (ended === 'late') {
    opts.log.error('worker did not stop in time; ending it', { worker: index });
    await end(r);
  }
  return typeof cut === 'number' ? cut : 0;
}

export function createWorkerPool(opts: WorkerPoolOptions): WorkerPool {
  const running: Array<Running | null> = Array.from({ length: opts.count }, () => null);
  let stopping = false;
  let nextId = 1;
  const watch = createStallWatch(opts.count, opts.stallMs);
  const { softBytes, hardOldGenMb } = heapLimits(opts.maxHeapMb);
  const watching = setInterval(() => {
    for (const { index, silentMs } of watch.stalled()) {
      const entry = running[index - 1];
      if (entry === null || entry === undefined) continue;
      opts.log.error('worker stalled; ending it', { worker: index, silent_ms: silentMs });
      opts.onStall(index);
      void end(entry).then((ended) => {
        // Not ended: it would not run the inspector's hook (a native call that never returns?). Watched
        // again, so it is tried again after another stall time.
        if (!ended && running[index - 1] === entry) watch.arm(index);
      });
    }
  }, WATCH_MS);
  watching.unref();

  /**
   * Ends a worker from outside without taking the process down (worker-rescue.ts); resolves false, the
   * worker left running, when that cannot be done safely.
   */
  function end(entry: Running): Promise<boolean> {
    entry.ending ??= rescueWorker(entry.worker, Math.max(opts.stallMs, RESCUE_MIN_MS)).then((ended) => {
      if (!ended) {
        opts.log.error('worker could not be ended: it runs no JavaScript (a native call?), and ending it so would abort the process', {
          worker: entry.index,
        });
        entry.ending = null;
      }
      return ended;
    });
    return entry.ending;
  }

  /** Starts worker `index` and resolves once it listens; rejects when it failed to. */
  function launch(index: number): Promise<void> {
    const { data, transfer } = opts.connect(index);
    const { port1: control, port2: workerControl } = new MessageChannel();
    const worker = new Worker(opts.script, {
      execArgv: WORKER_EXEC_ARGV,
      workerData: { ...data, index, control: workerControl, beats: watch.memory, heapBytes: softBytes },
      transferList: [...transfer, workerControl],
      resourceLimits: { maxOldGenerationSizeMb: hardOldGenMb },
    });
    const entry: Running = { index, worker, control, waiting: new Map(), ending: null };
    running[index - 1] = entry;
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      control.on('message', (m: WorkerReport) => {
        if (m.type === 'ready') {
          ready = true;
          watch.arm(index);
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
        watch.disarm(index);
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

  /** One worker's answer, or undefined when it gave none in time (it is stalled, or ended). */
  function ask(entry: Running | null, message: Record<string, unknown>, timeoutMs: number): Promise<unknown> {
    if (entry === null) return Promise.resolve(undefined);
    const id = nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        entry.waiting.delete(id);
        resolve(undefined);
      }, timeoutMs);
      entry.waiting.set(id, (value) => {
        clearTimeout(timer);
        resolve(value);
      });
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
        clearInterval(watching);
        await Promise.all(running.map((r) => r && end(r)));
        throw err;
      }
    },
    crash(index, fault = 'throw') {
      running[index - 1]?.control.postMessage({ type: 'crash', fault });
    },
    async ask(message, timeoutMs = opts.stallMs) {
      const values = await Promise.all(running.map((r) => ask(r, message, timeoutMs)));
      const unanswered = values.flatMap((v, i) => (v === undefined ? [i + 1] : []));
      return { values, unanswered };
    },
    async stop() {
      stopping = true;
      clearInterval(watching);
      const cuts = await Promise.all(running.map((r, i) => (r === null ? 0 : stopWorker(r, i + 1, opts, end))));
      return cuts.reduce((a, b) => a + b, 0);
    },
  };
}
