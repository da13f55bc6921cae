import { createServer, connect } from 'node:net';
import { request } from 'node:http';

/**
 * A port free on 127.0.0.1 right now, for servers that cannot report the port they bound to (nginx).
 * Another process could take it before the server binds; the server then fails to start, loudly.
 */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Resolves once 127.0.0.1:`port` accepts a connection; rejects when `proc` exits first or on timeout. */
export async function waitForPort(port, proc, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc?.exitInfo) throw new Error(`${proc.name} exited before listening on ${port}; output:\n${proc.output().trimEnd()}`);
    if (await canConnect(port)) return;
    if (Date.now() > deadline) throw new Error(`${proc?.name ?? 'server'}: nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function canConnect(port) {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** POSTs `body` as JSON to `url` on a fresh connection, with `headers` besides; resolves `{ status, body }`. */
export function postJson(url, body, timeoutMs = 5_000, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', ...headers }, timeout: timeoutMs },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Checks that `url` answers `body` (sent with `headers` besides) with HTTP 200 and a JSON-RPC success
 * (`result` present, no `error`). Returns null when it does, else a sentence saying what came back.
 */
export async function checkJsonRpcResult(url, body, headers = {}) {
  let res;
  try {
    res = await postJson(url, body, 5_000, headers);
  } catch (err) {
    return `no answer: ${err.message}`;
  }
  const shown = res.body.length > 300 ? `${res.body.slice(0, 300)}...` : res.body;
  if (res.status !== 200) return `HTTP ${res.status}: ${shown}`;
  let parsed;
  try {
    parsed = JSON.parse(res.body);
  } catch {
    return `not JSON: ${shown}`;
  }
  if (parsed?.jsonrpc !== '2.0' || !('result' in parsed) || 'error' in parsed) return `not a JSON-RPC result: ${shown}`;
  return null;
}
