// Calls made to anvil through its own port, and the calls anvil saw. anvil (without --quiet) logs the
// method of every JSON-RPC call it serves on a line of its own, so its log counts the calls that reached
// the node at no cost to the gateway: a counting relay in between would add a hop and change the very
// upstream connection whose behaviour (pipelining, answer times) the figures depend on.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { postJson } from './net.mjs';

/** The `result` of `method(params)` asked of anvil on `port` directly; throws on anything but a result. */
export async function anvilCall(port, method, params) {
  const res = await postJson(`http://127.0.0.1:${port}/`, JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }));
  const answer = res.status === 200 ? JSON.parse(res.body) : null;
  if (!answer || !('result' in answer)) throw new Error(`anvil answered ${method} with HTTP ${res.status}: ${res.body.slice(0, 300)}`);
  return answer.result;
}

/**
 * Counts the calls to `method` in anvil's log at `logPath`; `count()` reads what was written since the
 * last read and returns the total since the counter was made. A line being written is kept for the
 * next read, never counted half.
 */
export function anvilCallCounter(logPath, method) {
  let offset = 0;
  let partial = '';
  let total = 0;
  const read = () => {
    const fd = openSync(logPath, 'r');
    try {
      const size = fstatSync(fd).size;
      if (size <= offset) return;
      const buf = Buffer.alloc(size - offset);
      const got = readSync(fd, buf, 0, buf.length, offset);
      offset += got;
      const lines = (partial + buf.subarray(0, got).toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (line.trim() === method) total++;
    } finally {
      closeSync(fd);
    }
  };
  read();
  const base = total;
  return {
    count() {
      read();
      return total - base;
    },
  };
}
