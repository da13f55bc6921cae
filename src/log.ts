/**
 * The daemon's log: one line per event, `level message key=value ...`, on stderr so journald keeps it.
 * Nothing secret is ever passed in: upstreams are logged by their label (scheme, host, port) and
 * API keys not at all.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

const ORDER: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

function format(level: LogLevel, msg: string, fields?: LogFields): string {
  let line = `${level} ${msg}`;
  if (fields) {
    for (const [k, v] of Object.entries(fields)) {
      if (v === undefined) continue;
      const s = String(v);
      line += ` ${k}=${/[\s"=]/.test(s) ? JSON.stringify(s) : s}`;
    }
  }
  return line;
}

/** A logger writing to `write` (stderr by default) at `min` level and above. */
export function createLogger(min: LogLevel = 'info', write: (line: string) => void = (l) => process.stderr.write(l + '\n')): Logger {
  const at =
    (level: LogLevel) =>
    (msg: string, fields?: LogFields): void => {
      if (ORDER[level] >= ORDER[min]) write(format(level, msg, fields));
    };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
