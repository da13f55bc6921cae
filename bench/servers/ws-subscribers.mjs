// A share of the fan-out bench's subscribers, in a process of its own (the bench runs several, so that
// 10,000 sockets are read by more than one event loop). It is driven over HTTP on loopback:
//
//   POST /connect {url, count, localAddress, base, concurrency, timeoutMs}
//     opens `count` WebSockets to `url` from `localAddress`, at most `concurrency` handshakes at once,
//     and sends eth_subscribe newHeads on each; answers once every one has its subscription id (or
//     with the failures). Blocks are counted by number from `base` + 1.
//   POST /report
//     per block (index = number - base - 1): the subscribers that got it, extra copies, and the time
//     the first and the last of them got it (performance.timeOrigin + performance.now(), the bench's
//     clock in every process); and what went wrong: frames out of order, of another subscription,
//     unreadable, sockets closed before the end.
//
// A notification is read without parsing its JSON: its subscription id and `"number":"0x…"` are found
// in the bytes, so the client's own cost stays small beside the servers'.
// Usage: node ws-subscribers.mjs; prints `Listening on 127.0.0.1:PORT`. Stops on SIGTERM/SIGINT.
import { createServer } from 'node:http';
import WebSocket from 'ws';

/** Blocks one run may count (warm-up and measured); a number outside is counted as unexpected. */
const MAX_BLOCKS = 256;
const NUMBER_KEY = Buffer.from('"number":"0x');
const QUOTE = 0x22;
const SUBSCRIBE = '{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}';

const now = () => performance.timeOrigin + performance.now();

const sockets = [];
let base = 0;
const received = new Uint32Array(MAX_BLOCKS); // subscribers that got block i at least once
const extra = new Uint32Array(MAX_BLOCKS); // copies beyond the first
const firstAt = new Float64Array(MAX_BLOCKS);
const lastAt = new Float64Array(MAX_BLOCKS);
const problems = { outOfOrder: 0, otherSubscription: 0, unreadable: 0, unexpectedNumber: 0, closedEarly: 0 };
const closeReasons = new Map();

/** One subscriber: its socket, its subscription id's bytes, and how often it got each block. */
function subscriber(url, localAddress) {
  const counts = new Uint8Array(MAX_BLOCKS);
  const s = { ws: null, needle: null, counts, last: -1, subscribed: false };
  s.opened = new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, localAddress, skipUTF8Validation: true, maxPayload: 1 << 20 });
    s.ws = ws;
    ws.on('open', () => ws.send(SUBSCRIBE));
    ws.on('error', (err) => {
      if (!s.subscribed) reject(err);
    });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => reject(new Error(`upgrade answered HTTP ${res.statusCode}: ${body.slice(0, 200)}`)));
    });
    ws.on('close', (code, reason) => {
      if (!s.subscribed) return reject(new Error(`closed before subscribing (${code} ${reason})`));
      problems.closedEarly++;
      const key = `${code} ${reason}`.trim();
      closeReasons.set(key, (closeReasons.get(key) ?? 0) + 1);
    });
    ws.on('message', (data) => {
      if (s.subscribed) return onNotification(s, data);
      const answer = JSON.parse(data.toString());
      if (typeof answer.result !== 'string') return reject(new Error(`eth_subscribe answered ${data.toString().slice(0, 200)}`));
      s.needle = Buffer.from(`"subscription":"${answer.result}"`);
      s.subscribed = true;
      resolve();
    });
  });
  return s;
}

function onNotification(s, data) {
  const at = now();
  if (data.indexOf(s.needle) < 0) {
    problems.otherSubscription++;
    return;
  }
  const start = data.indexOf(NUMBER_KEY);
  const end = start < 0 ? -1 : data.indexOf(QUOTE, start + NUMBER_KEY.length);
  if (end < 0) {
    problems.unreadable++;
    return;
  }
  const i = parseInt(data.toString('latin1', start + NUMBER_KEY.length, end), 16) - base - 1;
  if (!(i >= 0 && i < MAX_BLOCKS)) {
    problems.unexpectedNumber++;
    return;
  }
  if (i <= s.last) problems.outOfOrder++;
  s.last = i;
  if (s.counts[i]++ > 0) {
    extra[i]++;
    return;
  }
  if (received[i]++ === 0) firstAt[i] = at;
  lastAt[i] = at;
}

/** Opens `count` subscribers, `concurrency` handshakes at a time; resolves with the failures. */
async function connect({ url, count, localAddress, concurrency = 100, timeoutMs = 120_000 }) {
  const started = now();
  const failures = [];
  let next = 0;
  const deadline = Date.now() + timeoutMs;
  async function lane() {
    while (next < count && Date.now() < deadline) {
      next++;
      const s = subscriber(url, localAddress);
      sockets.push(s);
      try {
        await s.opened;
      } catch (err) {
        failures.push(err.message);
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
  if (next < count) failures.push(`${count - next} subscribers not started within ${timeoutMs} ms`);
  return {
    subscribed: sockets.filter((s) => s.subscribed).length,
    failed: failures.length,
    failures: failures.slice(0, 5),
    ms: now() - started,
  };
}

function report() {
  const blocks = [];
  let last = MAX_BLOCKS - 1;
  while (last >= 0 && received[last] === 0 && extra[last] === 0) last--;
  for (let i = 0; i <= last; i++)
    blocks.push({ received: received[i], extra: extra[i], firstAt: firstAt[i] || null, lastAt: lastAt[i] || null });
  return { subscribers: sockets.filter((s) => s.subscribed).length, blocks, problems, closeReasons: Object.fromEntries(closeReasons) };
}

const control = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const send = (status, body) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    try {
      const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : {};
      if (req.url === '/connect') {
        base = body.base;
        send(200, await connect(body));
      } else if (req.url === '/report') send(200, report());
      else send(404, { error: `no ${req.url}` });
    } catch (err) {
      send(500, { error: err.message });
    }
  });
});
control.listen(0, '127.0.0.1', () => process.stdout.write(`Listening on 127.0.0.1:${control.address().port}\n`));

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    for (const s of sockets) s.ws.terminate();
    process.exit(0);
  });
}
