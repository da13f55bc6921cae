// A full collection in every isolate of a server under test, through the inspector it was started with
// (--inspect=127.0.0.1:0): the fan-out bench reads the server's RSS without subscribers after it, so what
// the subscribers add is measured from the same floor whatever V8's memory reducer did or did not do yet.
// HeapProfiler.collectGarbage is V8's low-memory collection: it also shrinks the young generation and
// returns free pages, as the memory reducer would.
import WebSocket from 'ws';

/** The inspector option a server needs for collectEverywhere (any free loopback port; the URL is in its output). */
export const INSPECT_ARG = '--inspect=127.0.0.1:0';

/** How long workers have to be listed once NodeWorker is enabled (they are announced at once). */
const ATTACH_WAIT_MS = 300;
const CALL_TIMEOUT_MS = 30_000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Collects garbage in the main isolate of the process whose output is `output()` and in each of its
 * worker threads; resolves with the number of isolates collected. Throws when the process printed no
 * inspector URL or a call failed.
 */
export async function collectEverywhere(output) {
  const url = /Debugger listening on (ws:\/\/\S+)/.exec(output())?.[1];
  if (url === undefined) throw new Error('the server printed no inspector URL (started without --inspect?)');
  const ws = new WebSocket(url, { perMessageDeflate: false });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const pending = new Map();
  const workers = [];
  let nextId = 1;
  const settle = (msg) => {
    const done = pending.get(msg.id);
    if (done === undefined) return;
    pending.delete(msg.id);
    done(msg);
  };
  ws.on('message', (data) => {
    const msg = JSON.parse(data.toString());
    if (msg.id !== undefined) settle(msg);
    else if (msg.method === 'NodeWorker.attachedToWorker') workers.push(msg.params.sessionId);
    else if (msg.method === 'NodeWorker.receivedMessageFromWorker') {
      const inner = JSON.parse(msg.params.message);
      if (inner.id !== undefined) settle(inner);
    }
  });
  const call = (method, params = {}, sessionId = null) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => reject(new Error(`inspector ${method} not answered in ${CALL_TIMEOUT_MS} ms`)), CALL_TIMEOUT_MS);
      pending.set(id, (msg) => {
        clearTimeout(timer);
        if (msg.error) reject(new Error(`inspector ${method}: ${msg.error.message}`));
        else resolve(msg.result);
      });
      const message = JSON.stringify({ id, method, params });
      // A worker's calls travel inside NodeWorker.sendMessageToWorker; their answers come back the same way.
      if (sessionId === null) ws.send(message);
      else ws.send(JSON.stringify({ id: nextId++, method: 'NodeWorker.sendMessageToWorker', params: { sessionId, message } }));
    });
  try {
    await call('NodeWorker.enable', { waitForDebuggerOnStart: false });
    await sleep(ATTACH_WAIT_MS);
    for (const sessionId of workers) await call('HeapProfiler.collectGarbage', {}, sessionId);
    await call('HeapProfiler.collectGarbage');
    return 1 + workers.length;
  } finally {
    ws.close();
  }
}
