import { existsSync } from 'node:fs';
import { readOrNull, sumOverThreads } from './proc-stats.mjs';

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
  return sumOverThreads(pid, (p, tid) => Number(readOrNull(`/proc/${p}/task/${tid}/schedstat`)?.split(' ')[0] ?? 0));
}
