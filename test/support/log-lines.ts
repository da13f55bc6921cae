/**
 * The daemon logs JSON lines (pino); tests that read what was logged see each line as it read before
 * JSON, `level msg key=value ...` (values with spaces, quotes or `=` JSON-quoted), so an assertion
 * names the message and fields without the line's time.
 */
import { createLogger, type Logger, type LogLevel } from '../../src/log.js';

/** One JSON log line as `level msg key=value ...`; `time` is left out. */
export function logText(jsonLine: string): string {
  const { level, msg, time: _time, ...fields } = JSON.parse(jsonLine) as Record<string, unknown>;
  let line = `${String(level)} ${String(msg)}`;
  for (const [k, v] of Object.entries(fields)) {
    const s = String(v);
    line += ` ${k}=${/[\s"=]/.test(s) ? JSON.stringify(s) : s}`;
  }
  return line;
}

/** A logger at `level` whose lines land in `lines` as logText renders them. */
export function textLogger(lines: string[], level: LogLevel = 'debug'): Logger {
  return createLogger(level, (l) => lines.push(logText(l)));
}
