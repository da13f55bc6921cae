import { readFileSync } from 'node:fs';
import { cpuTicks } from './proc-stats.mjs';

/**
 * How busy the rest of the machine was during a run. On a shared box another job can take the server's
 * core halfway through a measurement; these figures tell such a run from a slow server.
 */

/** From the `cpu` line of /proc/stat, in ticks summed over all cores: time spent running tasks, and steal. */
function machineTicks() {
  const line =
    readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('cpu ')) ?? '';
  const [user = 0, nice = 0, system = 0, , , , , steal = 0] = line.trim().split(/\s+/).slice(1).map(Number);
  return { tasks: user + nice + system, steal };
}

/** This process and its reaped children (wrk, once it has exited): utime, stime, cutime, cstime. */
function selfTicks() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
}

/**
 * Starts counting; `stop(ours)` returns `{ otherCpuPercent, stealPercent }` in percent of one core over
 * the window. `ours` are the pids whose CPU belongs to the measurement (server, upstream); this process
 * and wrk are counted through selfTicks. Kernel threads (which also carry softirq work) count as other.
 */
export function startBoxLoad(clkTck, ours) {
  const sumOurs = () => ours.reduce((s, pid) => s + cpuTicks(pid), 0) + selfTicks();
  const t0 = process.hrtime.bigint();
  const m0 = machineTicks();
  const ours0 = sumOurs();
  return {
    stop() {
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      const m1 = machineTicks();
      const other = m1.tasks - m0.tasks - (sumOurs() - ours0);
      const pct = (ticks) => (seconds > 0 ? Math.max(0, (100 * ticks) / clkTck / seconds) : 0);
      return { otherCpuPercent: pct(other), stealPercent: pct(m1.steal - m0.steal) };
    },
  };
}
