/**
 * The daemon's log: JSON lines from pino, on stdout for journald. Each line has `time` (ms since the
 * epoch), `level` (its name), `msg`, and the context fields the caller passed (`chain`, `upstream` by
 * name, `method`, `status`, `duration_ms`, ...). Nothing secret is ever passed in: upstreams are named
 * by their configured name or host:port, never their URL (which may hold a provider's key), and an API
 * key only ever by the prefix the CLI lists.
 */
import { createRequire } from 'node:module';

/** pino, loaded by the first createLogger: a worker thread forwards its records and starts without it. */
const loadPino = (): typeof import('pino') => createRequire(import.meta.url)('pino');

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];
export type LogFields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Changes the least level written from now on (a reload's `log.level`). */
  setLevel(level: LogLevel): void;
}

/**
 * A logger at `level` and above, writing each JSON line to `write` (stdout by default, asynchronously
 * and flushed at exit). Tests pass `write` to read the lines.
 */
export function createLogger(level: LogLevel = 'info', write?: (line: string) => void): Logger {
  const { pino } = loadPino();
  const destination = write === undefined ? pino.destination({ dest: 1, sync: false }) : { write };
  const p = pino(
    {
      level,
      base: undefined,
      // Level names, not pino's numbers, so `journalctl -o cat | jq 'select(.level=="warn")'` reads plainly.
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
  return {
    debug: (msg, fields) => p.debug(fields ?? {}, msg),
    info: (msg, fields) => p.info(fields ?? {}, msg),
    warn: (msg, fields) => p.warn(fields ?? {}, msg),
    error: (msg, fields) => p.error(fields ?? {}, msg),
    setLevel(l) {
      p.level = l;
    },
  };
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {}, setLevel() {} };

/** One log record as a worker thread hands it to the main thread's log. */
export interface LogRecord {
  level: LogLevel;
  msg: string;
  fields: LogFields | undefined;
}

/**
 * A worker thread's log: records at `level` and above go to `send` (a port to the main thread, whose log
 * writes them), so a process has one log stream whatever its number of threads.
 */
export function createForwardingLogger(level: LogLevel, send: (record: LogRecord) => void): Logger {
  let least = LOG_LEVELS.indexOf(level);
  const at =
    (l: LogLevel) =>
    (msg: string, fields?: LogFields): void => {
      if (LOG_LEVELS.indexOf(l) >= least) send({ level: l, msg, fields });
    };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    setLevel(l) {
      least = LOG_LEVELS.indexOf(l);
    },
  };
}

/**
 * What an error says, for a log field or a reply: its message, or the value itself when something other
 * than an Error was thrown (a rejection with a string, undefined or null must not throw again here).
 */
export function errorText(err: unknown): string {
  const message = (err as { message?: unknown } | null | undefined)?.message;
  return typeof message === 'string' && message !== '' ? message : String(err);
}
