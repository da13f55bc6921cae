import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startProcess } from './processes.mjs';

/** true when a `wrk` binary runs (it prints its usage and exits 1 on -v, so only ENOENT counts as missing). */
export function hasWrk() {
  const r = spawnSync('wrk', ['-v']);
  return !r.error;
}

export function wrkVersion() {
  const r = spawnSync('wrk', ['-v']);
  return /wrk\s+(\S+)/.exec(`${r.stdout}${r.stderr}`)?.[1] ?? null;
}

/**
 * Writes the Lua script that makes every wrk request a POST of `body` as JSON; returns its path. With
 * an array of bodies, each request takes the next body in turn, so that the calls in flight at one
 * moment differ: a gateway that shares identical calls in flight would otherwise forward few of them.
 */
export function writePostScript(dir, body, name = 'post.lua') {
  const path = join(dir, name);
  if (!Array.isArray(body)) {
    writeFileSync(path, `wrk.method = "POST"\nwrk.body = ${luaString(body)}\nwrk.headers["Content-Type"] = "application/json"\n`);
    return path;
  }
  // The requests are formatted once per thread in init(): request() runs once per request on wrk's thread.
  writeFileSync(
    path,
    `local bodies = {\n${body.map((b) => `  ${luaString(b)},\n`).join('')}}
local requests = {}
local turn = 0
function init(args)
  for i, b in ipairs(bodies) do requests[i] = wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, b) end
end
function request()
  turn = turn % #requests + 1
  return requests[turn]
end
`,
  );
  return path;
}

function luaString(s) {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
}

/**
 * Runs wrk once against `url` and returns its parsed report. wrk is bounded by its own -d; the kill
 * timer only guards against a wrk that hangs on a server that stopped answering.
 */
export async function runWrk({ name = 'wrk', url, script, seconds, connections, threads, core }) {
  const args = [`-t${threads}`, `-c${connections}`, `-d${seconds}s`, '--latency', '-s', script, url];
  const proc = startProcess(name, 'wrk', args, { core });
  const killTimer = setTimeout(() => proc.stop(), (seconds + 30) * 1000);
  const info = await proc.exited;
  clearTimeout(killTimer);
  const text = proc.output();
  if (info.code !== 0) throw new Error(`wrk failed (${info.signal ?? `code ${info.code}`}):\n${text}`);
  return parseWrk(text);
}

const UNIT_MS = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

function toMs(value, unit) {
  return Number(value) * UNIT_MS[unit];
}

/**
 * Reads wrk's --latency report. Non-2xx/3xx answers and socket errors are returned as counts so the
 * caller can flag the run: wrk counts them in Requests/sec as if they had succeeded.
 */
export function parseWrk(text) {
  const num = (re) => {
    const m = re.exec(text);
    return m ? Number(m[1]) : null;
  };
  const percentiles = {};
  const lines = text.split('\n');
  const distAt = lines.findIndex((l) => l.trim() === 'Latency Distribution');
  for (const line of distAt < 0 ? [] : lines.slice(distAt + 1)) {
    const m = /^\s*(\d+)%\s+([\d.]+)(us|ms|s|m|h)\s*$/.exec(line);
    if (!m) break;
    percentiles[m[1]] = toMs(m[2], m[3]);
  }
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
  const socketErrors = socket
    ? { connect: Number(socket[1]), read: Number(socket[2]), write: Number(socket[3]), timeout: Number(socket[4]) }
    : { connect: 0, read: 0, write: 0, timeout: 0 };
  const latencyLine = /^\s*Latency\s+([\d.]+)(us|ms|s|m|h)\s+[\d.]+\w+\s+([\d.]+)(us|ms|s|m|h)/m.exec(text);
  const result = {
    requests: num(/(\d+) requests in /),
    seconds: num(/requests in ([\d.]+)s/),
    rps: num(/Requests\/sec:\s+([\d.]+)/),
    p50Ms: percentiles['50'] ?? null,
    p75Ms: percentiles['75'] ?? null,
    p90Ms: percentiles['90'] ?? null,
    p99Ms: percentiles['99'] ?? null,
    avgMs: latencyLine ? toMs(latencyLine[1], latencyLine[2]) : null,
    maxMs: latencyLine ? toMs(latencyLine[3], latencyLine[4]) : null,
    non2xx: num(/Non-2xx or 3xx responses:\s+(\d+)/) ?? 0,
    socketErrors,
  };
  if (result.rps === null || result.requests === null || result.p99Ms === null) {
    throw new Error(`could not read wrk's report:\n${text}`);
  }
  return result;
}
