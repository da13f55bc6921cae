// A stand-in Ethereum node for the fan-out bench: JSON-RPC over HTTP (POST /) and WebSocket (any path)
// with eth_subscribe newHeads, whose chain only grows when the bench says so: POST /bench/emit makes the
// next block and sends its head to every newHeads subscription, answering the block number and the
// moment it was sent (performance.timeOrigin + performance.now(), comparable across processes).
// GET /bench/stats counts the upstream subscriptions a server under test holds.
//
// Heads look like anvil's (~1.8 KB notification) but carry header fields only, as geth's do, so a
// gateway that forwards the header and a relay that forwards the raw frame send the same bytes.
// eth_blockNumber and eth_getBlockByNumber answer the same chain, so a gateway's backfill finds it.
//
// Usage: node fake-node.mjs [port] [first block number]; prints `Listening on 127.0.0.1:PORT`.
import { createHash } from 'node:crypto';
import { listenAndAnnounce, loadUws } from './uws-server.mjs';

const port = Number(process.argv[2] ?? 0);
const CHAIN_ID = 1;
/** The head before the first emit; later heads count up from it. */
let head = Number(process.argv[3] ?? 20_000_000);

const now = () => performance.timeOrigin + performance.now();
const hex = (n) => `0x${n.toString(16)}`;
const hash = (label) => `0x${createHash('sha256').update(label).digest('hex')}`;
const EMPTY_ROOT = '0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421';
// A mainnet-like bloom: mostly zero, some bits set (its length is what matters: 256 bytes).
const LOGS_BLOOM = `0x${'0'.repeat(440)}${'00200000000040000000000000000001'.repeat(2)}00000000`;

/** The header of block `n`, in anvil's field order: the newHeads notification's `result`. */
function headerOf(n) {
  return {
    hash: hash(`block ${n}`),
    parentHash: hash(`block ${n - 1}`),
    sha3Uncles: '0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347',
    miner: '0x95222290dd7278aa3ddd389cc1e1d165cc4bafe5',
    stateRoot: hash(`state ${n}`),
    transactionsRoot: EMPTY_ROOT,
    receiptsRoot: EMPTY_ROOT,
    logsBloom: LOGS_BLOOM,
    difficulty: '0x0',
    number: hex(n),
    gasLimit: '0x1c9c380',
    gasUsed: '0x0',
    timestamp: hex(1_700_000_000 + 12 * n),
    extraData: '0x6265617665726275696c642e6f7267000000000000000000000000000000000000',
    mixHash: hash(`mix ${n}`),
    nonce: '0x0000000000000000',
    baseFeePerGas: '0x3b9aca00',
    withdrawalsRoot: EMPTY_ROOT,
    blobGasUsed: '0x0',
    excessBlobGas: '0x0',
    parentBeaconBlockRoot: hash(`beacon ${n}`),
    requestsHash: '0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  };
}

/** Blocks below the head eth_getBlockByNumber still answers (a backfill reaches no further); older: null. */
const KEPT_BLOCKS = 1_024;

/** eth_getBlockByNumber's answer: the header and a block's own fields, no transactions. */
function blockOf(n) {
  return { ...headerOf(n), totalDifficulty: '0x0', size: '0x267', uncles: [], transactions: [], withdrawals: [] };
}

function blockNumberOf(tag) {
  if (tag === 'latest' || tag === 'safe' || tag === 'finalized' || tag === 'pending') return head;
  if (tag === 'earliest') return 0;
  return typeof tag === 'string' && /^0x[0-9a-f]+$/i.test(tag) ? parseInt(tag, 16) : null;
}

/** Calls answered by method, over either transport; the counts show a backfill that should not happen. */
const calls = {};

function answer(req) {
  const id = req?.id ?? null;
  const ok = (result) => ({ jsonrpc: '2.0', id, result });
  calls[req?.method] = (calls[req?.method] ?? 0) + 1;
  switch (req?.method) {
    case 'eth_blockNumber':
      return ok(hex(head));
    case 'eth_chainId':
      return ok(hex(CHAIN_ID));
    case 'net_version':
      return ok(String(CHAIN_ID));
    case 'eth_getBlockByNumber': {
      const n = blockNumberOf(req.params?.[0]);
      return ok(n === null || n > head || n < head - KEPT_BLOCKS ? null : blockOf(n));
    }
    default:
      return { jsonrpc: '2.0', id, error: { code: -32601, message: `the method ${req?.method} does not exist/is not available` } };
  }
}

function answerBody(text) {
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    return JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } });
  }
  return JSON.stringify(Array.isArray(parsed) ? parsed.map(answer) : answer(parsed));
}

/** Open newHeads subscriptions: WebSocket → its subscription ids. */
const subscribers = new Map();
let subscribesTotal = 0;
let subscriptionsOpen = 0;
let wsConnections = 0;

function onWsMessage(ws, text) {
  let req;
  try {
    req = JSON.parse(text);
  } catch {
    return;
  }
  if (req.method === 'eth_subscribe') {
    if (req.params?.[0] !== 'newHeads') {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, error: { code: -32602, message: 'only newHeads here' } }));
      return;
    }
    // `0x` + 32 hex digits, as long as chaingate's own ids, so both servers' frames are as long.
    const sub = `0x${(++subscribesTotal).toString(16).padStart(32, '0')}`;
    subscribers.get(ws).add(sub);
    subscriptionsOpen++;
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: sub }));
    return;
  }
  if (req.method === 'eth_unsubscribe') {
    const gone = subscribers.get(ws).delete(req.params?.[0]);
    if (gone) subscriptionsOpen--;
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: gone }));
    return;
  }
  ws.send(JSON.stringify(answer(req)));
}

/** Makes the next block and sends its head to every subscription; the body is the emit record. */
function emit() {
  head++;
  const result = JSON.stringify(headerOf(head));
  const frames = [];
  for (const [ws, subs] of subscribers) {
    for (const sub of subs)
      frames.push([ws, `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${sub}","result":${result}}}`]);
  }
  const emittedAt = now();
  for (const [ws, frame] of frames) ws.send(frame, false);
  return { number: head, emittedAt, subscriptions: frames.length, bytes: frames[0]?.[1].length ?? 0 };
}

/** Reads a POST body, then answers it from the loop with a corked write. */
function onPost(res, reply) {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  const chunks = [];
  res.onData((chunk, isLast) => {
    chunks.push(Buffer.from(chunk.slice(0)));
    if (!isLast || aborted) return;
    const body = reply(Buffer.concat(chunks).toString());
    res.cork(() => res.writeHeader('content-type', 'application/json').end(body));
  });
}

const uWS = await loadUws();

const app = uWS
  .App()
  .post('/bench/emit', (res) => onPost(res, () => JSON.stringify(emit())))
  .get('/bench/stats', (res) => {
    res
      .writeHeader('content-type', 'application/json')
      .end(JSON.stringify({ head, subscriptionsOpen, subscribesTotal, wsConnections, wsOpen: subscribers.size, calls }));
  })
  .post('/*', (res) => onPost(res, answerBody))
  .ws('/*', {
    compression: uWS.DISABLED,
    idleTimeout: 120,
    maxPayloadLength: 1 << 20,
    open(ws) {
      wsConnections++;
      subscribers.set(ws, new Set());
    },
    message(ws, message) {
      onWsMessage(ws, Buffer.from(message).toString());
    },
    close(ws) {
      subscriptionsOpen -= subscribers.get(ws)?.size ?? 0;
      subscribers.delete(ws);
    },
  })
  .any('/*', (res) => {
    res.writeStatus('404 Not Found').end();
  });

listenAndAnnounce(uWS, app, 'fake node', port);
