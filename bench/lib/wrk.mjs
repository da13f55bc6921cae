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
 * `headers` (name → value) go on every request besides Content-Type (e.g. a browser's Origin).
 */
export function writePostScript(dir, body, name = 'post.lua', headers = {}) {
  const path = join(dir, name);
  const all = { 'Content-Type': 'application/json', ...headers };
  if (!Array.isArray(body)) {
    const lines = Object.entries(all).map(([k, v]) => `wrk.headers[${luaString(k)}] = ${luaString(v)}\n`);
    writeFileSync(path, `wrk.method = "POST"\nwrk.body = ${luaString(body)}\n${lines.join('')}`);
    return path;
  }
  const table = `{ ${Object.entries(all)
    .map(([k, v]) => `[${luaString(k)}] = ${luaString(v)}`)
    .join(', ')} }`;
  // The requests are formatted once per thread in init(): request() runs once per request on wrk's thread.
  writeFileSync(
    path,
    `local bodies = {\n${body.map((b) => `  ${luaString(b)},\n`).join('')}}
local requests = {}
local turn = 0
function init(args)
  for i, b in ipairs(bodies) do requests[i] = wrk.format("POST", nil, ${table}, b) end
end
function request()
  turn = turn % #requests + 1
  return requests[turn]
end
`,
  );
  return path;
}

/**
 * Writes a Lua script that POSTs `body` and checks every answer: its status must be `status` and its
 * body exactly `answer`. In `done` it prints one `answers:` line (read by parseWrk) with the answers
 * counted, those as expected, those with another status (and the first such status) and those with
 * another body. Each request carries its own `X-Forwarded-For` address in 10.0.0.0/8, in turn from
 * `firstAddress` (0 to 2^24 - 1), for a gateway that limits per client IP and trusts that header: no
 * address repeats within 2^24 requests. The addresses are only header values; nothing is sent to them.
 * With `newKeyPerRequest`, the URL's path ends with the first 27 characters of an API key and each
 * request adds the last 5 (base62, from the same counter): a key never presented before, every time.
 */
export function writeAnswerCheckScript(dir, { body, status, answer, firstAddress, newKeyPerRequest = false }, name = 'answer-check.lua') {
  const path = join(dir, name);
  // The request is formatted once per thread, then split around what changes: the address (and the key).
  writeFileSync(
    path,
    `local body = ${luaString(body)}
local want_status = ${status}
local want_body = ${luaString(answer)}
local new_keys = ${newKeyPerRequest}
local threads = {}
local next_first = ${firstAddress}
local line, head, tail
local n = 0
local digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
counted, expected, other_status, first_other, other_body = 0, 0, 0, 0, 0
function setup(thread)
  thread:set("n0", next_first)
  next_first = (next_first + 4194304) % 16777216
  table.insert(threads, thread)
end
function init(args)
  n = n0
  local req = wrk.format("POST", new_keys and wrk.path .. "@KEY@" or nil, { ["Content-Type"] = "application/json", ["X-Forwarded-For"] = "@ADDRESS@" }, body)
  if new_keys then
    local k = req:find("@KEY@", 1, true)
    line, req = req:sub(1, k - 1), req:sub(k + 5)
  end
  local at = req:find("@ADDRESS@", 1, true)
  head, tail = req:sub(1, at - 1), req:sub(at + 9)
end
local function key_end(v)
  local s = ""
  for i = 1, 5 do
    local d = v % 62
    s = digits:sub(d + 1, d + 1) .. s
    v = math.floor(v / 62)
  end
  return s
end
function request()
  n = (n + 1) % 16777216
  local address = "10." .. math.floor(n / 65536) .. "." .. math.floor(n / 256) % 256 .. "." .. n % 256
  if new_keys then return line .. key_end(n) .. head .. address .. tail end
  return head .. address .. tail
end
function response(status, headers, answer)
  counted = counted + 1
  if status ~= want_status then
    other_status = other_status + 1
    if first_other == 0 then first_other = status end
  elseif answer ~= want_body then
    other_body = other_body + 1
  else
    expected = expected + 1
  end
end
function done(summary, latency, requests)
  local sum = { counted = 0, expected = 0, other_status = 0, first_other = 0, other_body = 0 }
  for _, t in ipairs(threads) do
    for k, v in pairs(sum) do
      if k == "first_other" then
        if v == 0 then sum[k] = t:get(k) end
      else
        sum[k] = v + t:get(k)
      end
    end
  end
  io.write(string.format("answers: %d counted, %d as expected (status %d), %d other status (first %d), %d other body\\n",
    sum.counted, sum.expected, want_status, sum.other_status, sum.first_other, sum.other_body))
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
 * caller can flag the run: wrk counts them in Requests/sec as if they had succeeded. `answers` is there
 * when the script checked every answer (writeAnswerCheckScript).
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
  // Printed by writeAnswerCheckScript's script: every answer checked, not only counted by status class.
  const answers =
    /^answers: (\d+) counted, (\d+) as expected \(status (\d+)\), (\d+) other status \(first (\d+)\), (\d+) other body$/m.exec(text);
  if (answers) {
    const [counted, expected, status, otherStatus, firstOtherStatus, otherBody] = answers.slice(1).map(Number);
    result.answers = { counted, expected, status, otherStatus, firstOtherStatus, otherBody };
  }
  if (result.rps === null || result.requests === null || result.p99Ms === null) {
    throw new Error(`could not read wrk's report:\n${text}`);
  }
  return result;
}
