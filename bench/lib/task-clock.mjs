import { existsSync, readdirSync } from 'node:fs';
import { processTree, readOrNull } from './proc-stats.mjs';

/** false when the kernel keeps no schedstat (CONFIG_SCHED_INFO off): only utime + stime are left. */
export const HAS_SCHEDSTAT = existsSync('/proc/self/schedstat');

/**
 * CPU time of `pid`'s process tree in nanoseconds: the first field of /proc/<pid>/task/<tid>/schedstat
 * (the scheduler's runtime), summed over every thread. It is the total that Linux scales utime + stime
 * of /proc/<pid>/stat to, read at ns instead of 10 ms resolution, which matters for a server busy 10 ms
 * per notification. Without IRQ time accounting (the usual kernel build) it includes the softirq work
 * the kernel does in the process's time, such as delivering its loopback sends. null without
 * schedstat; a process that is gone counts 0.
 */
export function treeCpuNs(pid) {
  if (!HAS_SCHEDSTAT) return null;
  let sum = 0;
  for (const p of processTree(pid)) {
    let tids;
    try {
      tids = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) sum += Number(readOrNull(`/proc/${p}/task/${tid}/schedstat`)?.split(' ')[0] ?? 0);
  }
  return sum;
}
