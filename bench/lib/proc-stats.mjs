import { readFileSync, readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

/** Kernel clock ticks per second, the unit of utime/stime in /proc/<pid>/stat. */
export const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim()) || 100;

/** A /proc file's text, or null when it is gone (the process or thread ended). */
export function readOrNull(path) {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/**
 * `pid` and all its descendants: nginx serves from a worker forked by its master, so its memory and CPU
 * are those of the whole tree.
 */
export function processTree(pid) {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    let tasks;
    try {
      tasks = readdirSync(`/proc/${out[i]}/task`);
    } catch {
      continue;
    }
    for (const tid of tasks) {
      const children = readOrNull(`/proc/${out[i]}/task/${tid}/children`);
      if (children) for (const c of children.trim().split(/\s+/)) if (c) out.push(Number(c));
    }
  }
  return out;
}

/** VmRSS in kB, 0 when the process is gone. */
export function rssKb(pid) {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readOrNull(`/proc/${pid}/status`) ?? '');
  return m ? Number(m[1]) : 0;
}

/** utime + stime in clock ticks, 0 when the process is gone. */
export function cpuTicks(pid) {
  const stat = readOrNull(`/proc/${pid}/stat`);
  if (!stat) return 0;
  // The command name may hold spaces and parentheses; the fields after its closing ')' start at field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

function treeRssKb(pid) {
  return processTree(pid).reduce((sum, p) => sum + rssKb(p), 0);
}

/** utime + stime of `pid`'s tree in clock ticks (a gone process counts 0). */
export function treeCpuTicks(pid) {
  return processTree(pid).reduce((sum, p) => sum + cpuTicks(p), 0);
}

/**
 * Samples the RSS of `pid`'s tree every `intervalMs` and counts its CPU time from now until `stop()`,
 * which returns `{ maxRssMb, cpuSeconds }`.
 */
export function startSampling(pid, intervalMs = 100) {
  const cpuStart = treeCpuTicks(pid);
  let maxKb = treeRssKb(pid);
  const timer = setInterval(() => {
    maxKb = Math.max(maxKb, treeRssKb(pid));
  }, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      maxKb = Math.max(maxKb, treeRssKb(pid));
      return { maxRssMb: maxKb / 1024, cpuSeconds: (treeCpuTicks(pid) - cpuStart) / CLK_TCK };
    },
  };
}

/** `read(pid, tid)` summed over every thread of every process of `pid`'s tree (a gone one counts 0). */
export function sumOverThreads(pid, read) {
  let sum = 0;
  for (const p of processTree(pid)) {
    let tids;
    try {
      tids = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) sum += read(p, tid);
  }
  return sum;
}

/**
 * Involuntary context switches of every thread of `pid`'s process tree so far: a thread preempted while
 * it still had work, as happens when more threads are busy than there are cores.
 */
export function involuntarySwitches(pid) {
  return sumOverThreads(pid, (p, tid) => {
    const m = /^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(readOrNull(`/proc/${p}/task/${tid}/status`) ?? '');
    return m ? Number(m[1]) : 0;
  });
}
