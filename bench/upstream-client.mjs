// Client-side cost of one forwarded request: chaingate's upstream client against a raw keep-alive socket
// loop (the floor: write a prepared request, count response bytes) and undici's Pool.dispatch when it is
// installed. The fixed-answer uWS upstream runs in its own process on core 0, this process on core 1.
// Figures are this process's CPU µs per request and req/s; the clients take turns for `rounds` rounds
// and the medians are reported, since a shared machine drifts within a run.
//
//   npm run build && node bench/upstream-client.mjs [seconds=3] [inflight=64] [connections=16] [rounds=5]
//
// CLIENT_MODULE=/a/http-client.js[,/b/http-client.js] measures other builds of the client, side by side.
// PIPELINING=1,8 measures the client once per pipelining depth (default: the client's own default).
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';

const seconds = Number(process.argv[2] ?? 3);
const inflight = Number(process.argv[3] ?? 64);
const connections = Number(process.argv[4] ?? 16);
const rounds = Number(process.argv[5] ?? 5);
/** name → [{ rate, cpu }] over the rounds */
const results = new Map();
const BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const clientModules = (process.env.CLIENT_MODULE ?? fileURLToPath(new URL('../dist/upstreams/http-client.js', import.meta.url))).split(',');
const depths = process.env.PIPELINING === undefined ? [undefined] : process.env.PIPELINING.split(',').map(Number);
const upstreamScript = fileURLToPath(new URL('./servers/fixed-upstream.mjs', import.meta.url));

function pinned(core) {
  return spawnSync('taskset', ['-V']).status === 0 ? ['taskset', '-c', String(core)] : [];
}

async function startUpstream() {
  const [cmd, ...args] = [...pinned(0), process.execPath, upstreamScript];
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    proc.stdout.on('data', (d) => {
      const m = /Listening on 127\.0\.0\.1:(\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', () => reject(new Error('upstream exited')));
  });
  return { port, stop: () => proc.kill('SIGTERM') };
}

/** Runs `send(done)` with `inflight` requests outstanding for `seconds`; returns req/s and CPU µs per request. */
async function drive(name, send) {
  let count = 0;
  let measuring = false;
  let stop = false;
  const loop = () => {
    if (stop) return;
    send((ok) => {
      if (!ok && !stop) throw new Error(`${name}: request failed`);
      if (measuring) count++;
      loop();
    });
  };
  for (let i = 0; i < inflight; i++) loop();
  await new Promise((r) => setTimeout(r, 500));
  measuring = true;
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const used = process.cpuUsage(cpu);
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  measuring = false;
  stop = true;
  await new Promise((r) => setTimeout(r, 200));
  const figures = { rate: count / elapsed, cpu: (used.user + used.system) / count };
  results.set(name, [...(results.get(name) ?? []), figures]);
  process.stdout.write(
    `  ${name.padEnd(32)} ${figures.rate.toFixed(0).padStart(7)} req/s  ${figures.cpu.toFixed(1).padStart(6)} µs CPU/req\n`,
  );
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function chaingateClient(port, clientModule, name, pipelining) {
  const { createHttpUpstream } = await import(pathToFileURL(clientModule).href);
  const upstream = createHttpUpstream({
    url: `http://127.0.0.1:${port}/`,
    maxConnections: connections,
    ...(pipelining === undefined ? {} : { pipelining }),
  });
  const req = { method: 'POST', body: Buffer.from(BODY), headers: [['content-type', 'application/json']], timeoutMs: 5000 };
  await drive(name, (done) => {
    upstream.request(req, {
      onHead() {},
      onData: () => true,
      onEnd: () => done(true),
      onError: () => done(false),
    });
  });
  upstream.close();
}

/** The floor: no parsing, no pool logic; each socket knows the exact answer length from the first answer. */
async function rawLoop(port) {
  const request = Buffer.from(
    `POST / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`,
  );
  const idle = [];
  const waiting = [];
  const sockets = [];
  let answerLength = 0;
  const open = () => {
    const state = { socket: null, got: 0, done: null };
    state.socket = connect({ host: '127.0.0.1', port, noDelay: true });
    state.socket.on('data', (chunk) => {
      state.got += chunk.length;
      if (answerLength === 0) {
        const text = chunk.toString('latin1');
        const end = text.indexOf('\r\n\r\n');
        answerLength = end + 4 + Number(/content-length: (\d+)/i.exec(text)[1]);
      }
      if (state.got < answerLength) return;
      state.got = 0;
      const done = state.done;
      const next = waiting.shift();
      if (next) {
        state.done = next;
        state.socket.write(request);
      } else {
        idle.push(state);
      }
      done(true);
    });
    sockets.push(state.socket);
    return state;
  };
  await drive('raw keep-alive socket loop', (done) => {
    let state = idle.pop();
    if (state === undefined && sockets.length < connections) state = open();
    if (state === undefined) return void waiting.push(done);
    state.done = done;
    state.socket.write(request);
  });
  for (const s of sockets) s.destroy();
}

let undiciMissing = false;

async function undiciPool(port) {
  let Pool;
  try {
    ({ Pool } = createRequire(import.meta.url)('undici'));
  } catch {
    if (!undiciMissing) process.stdout.write('  undici Pool.dispatch: undici is not installed\n');
    undiciMissing = true;
    return;
  }
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections });
  const opts = { path: '/', method: 'POST', body: BODY, headers: { 'content-type': 'application/json' } };
  await drive('undici Pool.dispatch', (done) => {
    pool.dispatch(opts, {
      onConnect() {},
      onHeaders: () => true,
      onData: () => true,
      onComplete: () => done(true),
      onError: () => done(false),
    });
  });
  await pool.close();
}

const pin = pinned(1);
if (pin.length > 0) spawnSync('taskset', ['-cp', '1', String(process.pid)], { stdio: 'ignore' });
const upstream = await startUpstream();
process.stdout.write(`${rounds} rounds of ${seconds}s per client, ${inflight} in flight over ${connections} connections\n`);
try {
  for (let round = 1; round <= rounds; round++) {
    process.stdout.write(`round ${round}\n`);
    await rawLoop(upstream.port);
    for (const [i, module] of clientModules.entries()) {
      for (const depth of depths) {
        const name = ['chaingate http-client', clientModules.length > 1 ? `#${i + 1}` : '', depth === undefined ? '' : `p${depth}`]
          .filter(Boolean)
          .join(' ');
        await chaingateClient(upstream.port, module, name, depth);
      }
    }
    await undiciPool(upstream.port);
  }
} finally {
  upstream.stop();
}
process.stdout.write('median\n');
for (const [name, runs] of results) {
  const rate = median(runs.map((r) => r.rate));
  const cpu = median(runs.map((r) => r.cpu));
  process.stdout.write(`  ${name.padEnd(32)} ${rate.toFixed(0).padStart(7)} req/s  ${cpu.toFixed(1).padStart(6)} µs CPU/req\n`);
}
