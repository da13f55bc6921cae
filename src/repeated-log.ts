import type { LogFields, Logger } from './log.js';

/**
 * A condition that repeats on every request while it lasts (a node that is down fails each call sent
 * to it) is logged three ways instead of once per occurrence: a warn line when it starts, with the
 * first occurrence's detail; a warn summary with the count at most once per `summaryMs` while it goes
 * on; and an info line once it ends, that is once a whole summary period passed without it.
 */
export interface RepeatedLog {
  /**
   * Counts one occurrence of the condition named `key`. `fields` name it (chain, upstream) and are on
   * every line; `detail` (the reason) is logged on the first line and as the last one in summaries.
   */
  report(key: string, msg: string, fields: LogFields, detail?: LogFields): void;
  /** Conditions going on now, for tests and status. */
  active(): number;
  /** Stops the timers; conditions still going on are not logged as ended. */
  close(): void;
}

export interface RepeatedLogOptions {
  /** Least time between two summaries of one condition, and the quiet time that ends it, in ms; default 5000. */
  summaryMs?: number;
  /** Clock in ms; default performance.now. */
  now?: () => number;
  /** Schedules `fn` after `ms`; default an unref'd setTimeout, so a quiet daemon is not kept alive. */
  schedule?: (fn: () => void, ms: number) => () => void;
}

interface Condition {
  msg: string;
  fields: LogFields;
  detail: LogFields | undefined;
  startedAt: number;
  total: number;
  /** Occurrences since the last line written for it. */
  sinceLine: number;
  cancel: () => void;
}

function unrefTimeout(fn: () => void, ms: number): () => void {
  const timer = setTimeout(fn, ms);
  timer.unref();
  return () => clearTimeout(timer);
}

export function createRepeatedLog(log: Logger, opts: RepeatedLogOptions = {}): RepeatedLog {
  const summaryMs = opts.summaryMs ?? 5000;
  const now = opts.now ?? (() => performance.now());
  const schedule = opts.schedule ?? unrefTimeout;
  const conditions = new Map<string, Condition>();

  const tick = (key: string, c: Condition): void => {
    if (c.sinceLine === 0) {
      conditions.delete(key);
      log.info(`${c.msg}: ended`, { ...c.fields, total: c.total, duration_s: Math.round((now() - c.startedAt) / 1000) });
      return;
    }
    log.warn(`${c.msg}: still happening`, { ...c.fields, count: c.sinceLine, total: c.total, ...c.detail });
    c.sinceLine = 0;
    c.cancel = schedule(() => tick(key, c), summaryMs);
  };

  return {
    report(key, msg, fields, detail) {
      const going = conditions.get(key);
      if (going !== undefined) {
        going.total++;
        going.sinceLine++;
        going.detail = detail;
        return;
      }
      log.warn(msg, { ...fields, ...detail });
      const c: Condition = { msg, fields, detail, startedAt: now(), total: 1, sinceLine: 0, cancel: () => {} };
      c.cancel = schedule(() => tick(key, c), summaryMs);
      conditions.set(key, c);
    },
    active: () => conditions.size,
    close() {
      for (const c of conditions.values()) c.cancel();
      conditions.clear();
    },
  };
}

/** One occurrence as a worker thread hands it to the main thread, whose RepeatedLog named `repeated` counts it. */
export interface RepeatedRecord {
  repeated: string;
  key: string;
  msg: string;
  fields: LogFields;
  detail: LogFields | undefined;
}

/**
 * A worker thread's RepeatedLog: each occurrence goes to the main thread's log of that name, so a condition
 * that every worker sees (a node down) starts, is summed up and ends once for the process.
 */
export function createForwardingRepeatedLog(name: string, send: (record: RepeatedRecord) => void): RepeatedLog {
  return {
    report: (key, msg, fields, detail) => send({ repeated: name, key, msg, fields, detail }),
    active: () => 0,
    close() {},
  };
}
