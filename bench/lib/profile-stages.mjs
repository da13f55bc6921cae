// Reads the profiles bench/lib/profile-probe.mjs writes and splits them by the stage of a forwarded call
// (bench/profile-stages.mjs prints the result). A sample's time (or an allocation) belongs to the nearest
// frame on its stack that is chaingate's own code (dist/…): a builtin such as JSON.parse or a uWS method
// is charged to the code that called it. Frames with no chaingate code under them keep their own kind.

/** Stages in the order of a call's road; `rule` is matched against dist-relative file paths. */
export const STAGES = [
  [
    'request read and parse',
    /^server\/(body|http-rpc|app|routes|connection-gate|peer-address|held-request|main-app|listeners)\.js$|^jsonrpc\/parse\.js$/,
  ],
  ['key and limits', /^(tenancy|limits)\/|^pipeline\/(caller|tenancy|fleet[-\w]*)\.js$/],
  [
    'plan (method, params)',
    /^pipeline\/(plan|method-gate|split-logs|filter-calls)\.js$|^jsonrpc\/(methods[-\w]*|method-[-\w]+|param-[-\w]+|cacheability|log-range|state-reads|node-local)\.js$|^chain\/(method-policy|node-routes)\.js$/,
  ],
  ['metering', /^metering\/|^pipeline\/admission\.js$/],
  ['metrics and tally', /^metrics\/|^pipeline\/answers\.js$|^log\.js$/],
  [
    'call routing (shared call, failover)',
    /^pipeline\/(shared-call|route-call|upstream-failures)\.js$|^chain\/(attempts|dedup|response-cache|runtime|write-mark|head)\.js$/,
  ],
  [
    'upstream request build and write',
    /^pipeline\/forward\.js$|^upstreams\/(call-ids|request-head|http-client|http-pool|http-placement|selection|health|upstream-connection|upstream-socket|upstream-exchange|pipelining-guard|http-sweep)\.js$/,
  ],
  ['upstream answer read (HTTP)', /^upstreams\/(http-parser|http-response|http-head|upstream-error)\.js$/],
  ['answer parse and id rewrite', /^jsonrpc\/(id-rewrite[-\w]*|whole-answer|accepted-answer|raw-result)\.js$/],
  ['answer write', /^server\/(respond|stream-out|exchange)\.js$/],
];

/** exchange.js's request-side functions (the rest of it is the answer's). */
const REQUEST_SIDE = new Set(['openExchange', 'admitCaller']);

const OTHER_CODE = 'other chaingate code';
const NODE_INTERNALS = 'Node internals outside chaingate code (sockets, timers, microtasks)';
const NATIVE = '(program): native outside JS (uWS HTTP, libuv, syscalls)';
const GC = '(garbage collector)';

/** The dist-relative path of a frame's script, or null when it is not chaingate's. */
function distPath(url) {
  const at = url.lastIndexOf('/dist/');
  if (at < 0 || url.includes('/node_modules/')) return null;
  return url.slice(at + '/dist/'.length);
}

function stageOfDist(path, functionName) {
  if (path === 'server/exchange.js' && REQUEST_SIDE.has(functionName)) return STAGES[0][0];
  for (const [name, rule] of STAGES) if (rule.test(path)) return name;
  return `${OTHER_CODE} (${path})`;
}

/** The stage of a node given its own frame and its nearest dist ancestor's (or null). */
function stageOf(frame, distFrame) {
  if (distFrame !== null) return stageOfDist(distPath(distFrame.url), distFrame.functionName);
  const name = frame.functionName;
  if (name === '(garbage collector)') return GC;
  if (name === '(program)') return NATIVE;
  if (name === '(idle)') return '(idle)';
  return NODE_INTERNALS;
}

/** Walks a profile tree (CPU or heap: `children` as ids or as nodes), giving each node its stage. */
function stagesByNode(nodes, rootId, childrenOf) {
  const stage = new Map();
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const stack = [[rootId, null]];
  while (stack.length > 0) {
    const [id, inherited] = stack.pop();
    const node = byId.get(id);
    const own = distPath(node.callFrame.url) !== null ? node.callFrame : inherited;
    stage.set(id, stageOf(node.callFrame, own));
    for (const c of childrenOf(node)) stack.push([c, own]);
  }
  return { stage, byId };
}

/**
 * Self time per stage and per function of a CPU profile, in µs per call over `calls`; idle time is left
 * out of the total. `functions` lists the `top` costliest frames as `name file:line`.
 */
export function cpuStages(profile, calls, top = 25) {
  const { stage, byId } = stagesByNode(profile.nodes, profile.nodes[0].id, (n) => n.children ?? []);
  const selfUs = new Map();
  const deltas = profile.timeDeltas;
  // A sample's time is the gap to the next sample (the last one has none).
  for (let i = 0; i < profile.samples.length - 1; i++)
    selfUs.set(profile.samples[i], (selfUs.get(profile.samples[i]) ?? 0) + deltas[i + 1]);
  const byStage = new Map();
  const byFunction = new Map();
  let busyUs = 0;
  for (const [id, us] of selfUs) {
    const s = stage.get(id);
    if (s === '(idle)') continue;
    busyUs += us;
    byStage.set(s, (byStage.get(s) ?? 0) + us);
    const f = byId.get(id).callFrame;
    const where = f.url === '' ? '' : ` ${distPath(f.url) ?? f.url.replace(/^.*\/node_modules\//, '')}:${f.lineNumber + 1}`;
    const key = `${f.functionName || '(anonymous)'}${where}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
  }
  const perCall = (m) =>
    [...m].map(([name, us]) => ({ name, usPerCall: us / calls, share: us / busyUs })).sort((a, b) => b.usPerCall - a.usPerCall);
  return { busyUsPerCall: busyUs / calls, stages: perCall(byStage), functions: perCall(byFunction).slice(0, top) };
}

/**
 * The object size a sample of scaled size `scaled` stands for: V8 reports each sample as size / (1 - e^(-size /
 * interval)), the size of all the allocations one sample represents; solved for size by bisection.
 */
function objectSize(scaled, interval) {
  let lo = 0;
  let hi = scaled;
  for (let k = 0; k < 60; k++) {
    const mid = (lo + hi) / 2;
    if (mid / (1 - Math.exp(-mid / interval)) < scaled) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** Bytes and allocations per call, per stage and per allocating function, from a sampling heap profile. */
export function allocStages(profile, calls, top = 25) {
  const nodes = [];
  for (const stack = [profile.head]; stack.length > 0; ) {
    const n = stack.pop();
    nodes.push(n);
    for (const c of n.children) stack.push(c);
  }
  const { stage, byId } = stagesByNode(nodes, profile.head.id, (n) => n.children.map((c) => c.id));
  const interval = profile.samplingInterval;
  const byStage = new Map();
  const byFunction = new Map();
  let bytes = 0;
  let count = 0;
  const add = (m, key, b, n) => {
    const e = m.get(key) ?? { bytes: 0, count: 0 };
    e.bytes += b;
    e.count += n;
    m.set(key, e);
  };
  for (const s of profile.samples) {
    const n = s.size / objectSize(s.size, interval);
    bytes += s.size;
    count += n;
    add(byStage, stage.get(s.nodeId), s.size, n);
    const f = byId.get(s.nodeId).callFrame;
    const where = f.url === '' ? '' : ` ${distPath(f.url) ?? f.url.replace(/^.*\/node_modules\//, '')}:${f.lineNumber + 1}`;
    add(byFunction, `${f.functionName || '(anonymous)'}${where}`, s.size, n);
  }
  const perCall = (m) =>
    [...m]
      .map(([name, e]) => ({ name, bytesPerCall: e.bytes / calls, allocationsPerCall: e.count / calls }))
      .sort((a, b) => b.bytesPerCall - a.bytesPerCall);
  return {
    bytesPerCall: bytes / calls,
    allocationsPerCall: count / calls,
    stages: perCall(byStage),
    functions: perCall(byFunction).slice(0, top),
  };
}
