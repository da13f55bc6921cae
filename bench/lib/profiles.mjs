// BENCH_CPU_PROF: chaingate's rows of http-proxy, forward-cost and fences run under `node --cpu-prof`, each row's
// profiles in a folder of its own. See bench/README.md (Profiles).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * How long a profiled gateway gets to exit on stop before SIGKILL: V8 writes each thread's profile as the
 * thread ends, and a killed process writes none.
 */
export const PROFILED_STOP_MS = 30_000;

/**
 * The node arguments of row `rowId` of this round: none without BENCH_CPU_PROF, else `--cpu-prof` into
 * `<BENCH_CPU_PROF>/<section>.<rowId>.r<round>/`. No `--cpu-prof-name`: every thread (the main thread
 * and each worker) writes a file of its own, named by node with its pid and thread id, which one name
 * would have overwrite one another.
 */
export function cpuProfArgs(ctx, rowId) {
  const root = ctx.settings.cpuProfDir;
  if (!root) return [];
  const dir = join(root, `${ctx.section}.${rowId}.r${ctx.round}`);
  mkdirSync(dir, { recursive: true });
  return ['--cpu-prof', '--cpu-prof-dir', dir];
}

/** The grace a row's server gets on stop: longer when its profiles are being written. */
export const stopGraceMs = (ctx) => (ctx.settings.cpuProfDir ? PROFILED_STOP_MS : undefined);
