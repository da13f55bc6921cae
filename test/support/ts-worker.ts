/**
 * A worker thread running a TypeScript file of the tests. tsx, which runs the tests, hooks the module
 * loader of the thread it was imported in (`--import`); Node 20 does not carry those hooks into a worker
 * thread, so the worker registers them itself before importing its script.
 */
import { Worker, type WorkerOptions } from 'node:worker_threads';

const TSX_API = import.meta.resolve('tsx/esm/api');

export function tsWorker(script: URL, options: Omit<WorkerOptions, 'eval'> = {}): Worker {
  const boot = `import(${JSON.stringify(TSX_API)}).then(({ register }) => { register(); return import(${JSON.stringify(script.href)}); });`;
  return new Worker(boot, { ...options, eval: true });
}
