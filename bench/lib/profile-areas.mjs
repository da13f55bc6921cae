/**
 * Self time of `node --cpu-prof` profiles, by area of the forwarded call's road and by function: what
 * bench/profile-forward.mjs prints. An area is chosen by the frame's own file, else (for V8 builtins and
 * native functions, which have none) by the nearest caller's file with an area: a uWS `end` called from
 * respond.ts counts as the answer's write.
 */
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';

/** Areas, first match wins, by the path of a frame's script (chaingate's dist/ files, node's own). */
const AREAS = [
  [
    'upstream write',
    /upstreams\/(request-head|rpc-body|upstream-connection|http-placement|http-pool|upstream-exchange|call-ids)\.js|internal\/stream_base_commons|internal\/streams\/writable|node:net$/,
  ],
  ['answer parse', /upstreams\/(http-parser|http-head|http-response|upstream-socket)\.js/],
  ['id check + rewrite', /jsonrpc\/(whole-answer|id-rewrite|id-rewrite-scan|accepted-answer)\.js/],
  ['answer write', /server\/(respond|stream-out)\.js/],
  [
    'forward: call, attempts, node choice',
    /pipeline\/(forward|route-call|upstream-failures)\.js|chain\/attempts\.js|upstreams\/selection\.js/,
  ],
  ['sharing key + cache (dedup, shared-call)', /chain\/(dedup|response-cache)\.js|pipeline\/shared-call\.js|jsonrpc\/cacheability\.js/],
  ['request side (server, pipeline, parse)', /server\/|pipeline\/|jsonrpc\/parse\.js/],
  ['metrics', /metrics\/|prom-client/],
  ['other chaingate', /dist\//],
];

export function areaOf(url) {
  if (url === '') return null;
  for (const [name, re] of AREAS) if (re.test(url)) return name;
  return 'node internals / deps';
}

function short(url) {
  const m = /dist\/(.*)$/.exec(url);
  return m ? m[1] : url.replace(/^file:\/\/.*node_modules\//, '');
}

/** Self ms of every node of one profile, with its area, its function and its file. */
function selfTimes(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const hits = new Map();
  const { samples, timeDeltas } = profile;
  for (let i = 0; i < samples.length; i++) hits.set(samples[i], (hits.get(samples[i]) ?? 0) + (timeDeltas[i] ?? 0));
  const rows = [];
  for (const [id, us] of hits) {
    const node = byId.get(id);
    const { functionName, url } = node.callFrame;
    let area;
    if (functionName === '(garbage collector)') area = 'GC';
    else if (functionName === '(idle)' || functionName === '(program)') area = functionName;
    else {
      area = areaOf(url);
      for (let p = parent.get(id); area === null && p !== undefined; p = parent.get(p)) area = areaOf(byId.get(p).callFrame.url);
      area ??= 'native, no caller';
    }
    rows.push({ area, fn: `${functionName || '(anonymous)'} ${short(url)}`, us });
  }
  return rows;
}

/** A text report over the profiles (one per thread) for `requests` calls: µs per call by area and top functions. */
export function summarizeProfiles(paths, requests) {
  const out = [];
  for (const path of paths) {
    const rows = selfTimes(JSON.parse(readFileSync(path, 'utf8')));
    const busy = rows.filter((r) => r.area !== '(idle)').reduce((s, r) => s + r.us, 0);
    if (busy < 1e6) continue; // a thread that did not serve the load
    out.push(`${path}: ${(busy / requests).toFixed(2)} µs/call busy (idle excluded)`);
    const sum = (key) => {
      const m = new Map();
      for (const r of rows) if (r.area !== '(idle)') m.set(r[key], (m.get(r[key]) ?? 0) + r.us);
      return [...m].sort((a, b) => b[1] - a[1]);
    };
    for (const [area, us] of sum('area'))
      out.push(`  ${(us / requests).toFixed(2).padStart(6)} µs ${((100 * us) / busy).toFixed(1).padStart(5)}%  ${area}`);
    out.push('  top functions:');
    for (const [fn, us] of sum('fn').slice(0, 45)) out.push(`  ${(us / requests).toFixed(3).padStart(7)} µs  ${fn}`);
  }
  return out.join('\n');
}

/**
 * Starts V8's sampling heap profiler in the gateway whose log (`--inspect`'s "Debugger listening on ws://…"
 * line) is at `logPath`, keeping the samples of objects collected since: what a call allocates, not what
 * stays. `stop(requests)` resolves a text report of the bytes allocated per call, by function.
 */
export async function startAllocationSampling(logPath) {
  const url = /Debugger listening on (ws:\S+)/.exec(readFileSync(logPath, 'utf8'))?.[1];
  if (!url) throw new Error(`no inspector URL in ${logPath}`);
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  let next = 1;
  const waiting = new Map();
  socket.onmessage = (e) => {
    const m = JSON.parse(String(e.data));
    const w = waiting.get(m.id);
    if (!w) return;
    waiting.delete(m.id);
    if (m.error) w.reject(new Error(m.error.message));
    else w.resolve(m.result);
  };
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
  await send('HeapProfiler.enable');
  await send('HeapProfiler.startSampling', {
    samplingInterval: 512,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return {
    async stop(requests) {
      const { profile } = await send('HeapProfiler.stopSampling');
      socket.close();
      const byFn = new Map();
      let total = 0;
      const walk = (node) => {
        const { functionName, url, lineNumber } = node.callFrame;
        const key = `${functionName || '(anonymous)'} ${short(url)}:${lineNumber + 1}`;
        byFn.set(key, (byFn.get(key) ?? 0) + node.selfSize);
        total += node.selfSize;
        for (const c of node.children ?? []) walk(c);
      };
      walk(profile.head);
      const lines = [`allocated ~${(total / requests).toFixed(0)} bytes per call (sampled), by function:`];
      for (const [fn, bytes] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, 40)) {
        lines.push(`  ${(bytes / requests).toFixed(1).padStart(7)} B  ${fn}`);
      }
      return lines.join('\n');
    },
  };
}
