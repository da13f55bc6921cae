/**
 * The upstream road end to end: streaming with bounded memory, aborts, timeouts, HTTPS upstreams,
 * configured headers, credentials kept out of logs and bodies, a client that stops reading cut by uWS
 * after about 10 s, and many concurrent calls over few upstream connections each answered to the right
 * client.
 */
import t, { type Test } from 'tap';
import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AddressInfo, connect as netConnect, type Socket } from 'node:net';
import { testCertificate } from '../support/cert.js';
import { fakeUpstream } from '../support/fake-upstream.js';
import { evmChain, gatewayFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';
import { startDaemon } from '../support/daemon.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';

/** A keep-alive JSON-RPC node stand-in that answers `result: params[0]` after a random short delay. */
async function echoNode(t: Test, opts: { https?: { key: Buffer; cert: Buffer } } = {}) {
  // Connections counted, and those that carried the clients' calls (not the start-up probe's or the prober's).
  const seen = {
    connections: 0,
    callConnections: new Set<unknown>(),
    headers: [] as Array<Record<string, string | string[] | undefined>>,
    urls: [] as string[],
  };
  const handler = (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): void => {
    seen.headers.push(req.headers);
    seen.urls.push(req.url ?? '');
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const call = JSON.parse(body) as { id: number; method: string; params: unknown[] };
      if (call.method === 'eth_getTransactionByHash') seen.callConnections.add(req.socket);
      const answer = JSON.stringify({ jsonrpc: '2.0', id: call.id, result: call.params[0] ?? null });
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(answer), Math.random() * 5);
    });
  };
  const server = opts.https
    ? createHttpsServer({ ...opts.https, keepAlive: true }, handler)
    : createHttpServer({ keepAlive: true }, handler);
  server.on('connection', () => seen.connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { port: (server.address() as AddressInfo).port, seen };
}

t.test('many concurrent calls over two upstream connections: each client gets its own answer', async (t) => {
  const node = await echoNode(t);
  // max_connections is per upstream; two sockets carry 300 calls.
  const g2 = await gatewayFor(t, {
    chains: { devnet: { chain_id: 1, upstreams: [{ url: `http://127.0.0.1:${node.port}`, max_connections: 2 }] } },
  });
  const calls = Array.from({ length: 300 }, (_, i) => {
    const hash = '0x' + i.toString(16).padStart(64, '0');
    const id = i % 2 === 0 ? `"client-${i}"` : `${10n ** 25n + BigInt(i)}`;
    const body = `{"jsonrpc":"2.0","id":${id},"method":"eth_getTransactionByHash","params":["${hash}"]}`;
    return rpcRaw(`${g2.base}/v1/rpc/public`, body).then((text) => ({ text, id, hash }));
  });
  const answers = await Promise.all(calls);
  for (const a of answers) {
    if (a.text !== `{"jsonrpc":"2.0","id":${a.id},"result":"${a.hash}"}`) {
      t.fail(`wrong answer for id ${a.id}: ${a.text}`);
      return;
    }
  }
  t.pass('300 answers, each with its own id text and its own result');
  // For the process: with worker threads each keeps its share of the two.
  t.ok(node.seen.callConnections.size <= 2, `at most 2 upstream connections carried the calls (saw ${node.seen.callConnections.size})`);
});

function rpcRaw(url: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve(text));
    });
    req.on('error', reject);
    req.end(body);
  });
}

t.test('an https upstream with configured headers, credentials kept out of logs and bodies', async (t) => {
  const { certFile, keyFile, cert } = testCertificate(t);
  const node = await echoNode(t, { https: { key: readFileSync(keyFile), cert: readFileSync(certFile) } });
  const g = await gatewayFor(
    t,
    {
      chains: {
        devnet: {
          chain_id: 1,
          upstreams: [
            {
              url: `https://127.0.0.1:${node.port}/v3/provider-secret-path?key=query-secret`,
              headers: { 'X-Node-Token': 'header-secret' },
            },
          ],
        },
        dead: { chain_id: 2, upstreams: [{ url: 'http://operator:password-secret@127.0.0.1:1/path-secret' }] },
      },
      server: { default_chain: 'devnet' },
    },
    { ca: cert },
  );
  const ok = await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', ['0x' + '11'.repeat(20), 'latest'], 3);
  t.same(ok.json, { jsonrpc: '2.0', id: 3, result: '0x' + '11'.repeat(20) });
  t.equal(node.seen.headers.at(-1)?.['x-node-token'], 'header-secret', 'the configured header reached the node');
  t.equal(node.seen.urls.at(-1), '/v3/provider-secret-path?key=query-secret', "the URL's path and query are the request target");
  const dead = await rpc(`${g.base}/dead/v1/rpc/public`, 'eth_blockNumber', [], 4);
  t.equal(dead.status, 502);
  t.notMatch(dead.text, /secret|operator/, 'no credential in the error body');
  t.ok(g.logLines.length > 0);
  t.notMatch(g.logLines.join('\n'), /secret|operator/, 'no credential in the log');
  t.ok(g.gateway.context.chains.get('dead')!.upstreams[0]!.label === '127.0.0.1:1', 'the label is the default name, host and port');
});

t.test('userinfo in an upstream URL becomes Basic authentication', async (t) => {
  const node = await echoNode(t);
  const g = await gatewayFor(t, {
    chains: { devnet: { chain_id: 1, upstreams: [{ url: `http://alice:s3cret@127.0.0.1:${node.port}` }] } },
  });
  await rpc(`${g.base}/v1/rpc/public`, 'eth_getBalance', ['0x' + '22'.repeat(20), 'latest']);
  t.equal(node.seen.headers.at(-1)?.authorization, `Basic ${Buffer.from('alice:s3cret').toString('base64')}`);
});

t.test('a client that disconnects aborts its upstream call', async (t) => {
  const closed: number[] = [];
  const upstream = await fakeUpstream(t, (socket: Socket, request: string) => {
    // The call's connection, not the prober's (eth_blockNumber).
    if (request.includes('eth_gasPrice')) socket.on('close', () => closed.push(Date.now()));
  });
  const g = await gatewayFor(t, { chains: { devnet: evmChain([upstream.url], 1, { timeout_s: 30 }) } });
  const req = httpRequest(`${g.base}/v1/rpc/public`, { method: 'POST', headers: { 'content-type': 'application/json' } });
  req.on('error', () => {});
  req.end('{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","params":[]}');
  while (!upstream.requests.some((r) => r.includes('eth_gasPrice'))) await new Promise((r) => setTimeout(r, 10));
  const cutAt = Date.now();
  req.destroy();
  for (let i = 0; i < 200 && closed.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(closed.length, 1, 'the upstream saw its connection closed');
  t.ok(closed[0]! - cutAt < 1500, 'promptly, long before the 30 s timeout');
});

t.test('a keyed client that leaves before its answer gets the RU it had set aside back', async (t) => {
  const upstream = await fakeUpstream(t, () => {});
  const g = await gatewayFor(t, { chains: { devnet: evmChain([upstream.url], 1, { timeout_s: 30 }) } });
  const tenancy = g.gateway.context.tenancy;
  const owner = createOwnerAdmin(tenancy.store!).createOwner('o', 'growth', 1000);
  const made = tenancy.directory!.createEndpoint(owner.id, 'devnet', 'x', 10);
  if (!('apiKey' in made)) throw new Error('no endpoint');
  const before = tenancy.ledger.available(owner.id);
  const calls = () => upstream.requests.filter((r) => r.includes('eth_gasPrice')).length;
  const single = '{"jsonrpc":"2.0","id":1,"method":"eth_gasPrice","params":[]}';
  // A single call (streamed to its client) and a batch item (collected whole), each left mid-call.
  for (const [i, body] of [single, `[${single}]`].entries()) {
    const req = httpRequest(`${g.base}/v1/rpc/${made.apiKey}`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    req.on('error', () => {});
    req.end(body);
    while (calls() <= i) await new Promise((r) => setTimeout(r, 10));
    t.ok(tenancy.ledger.available(owner.id) < before, 'set aside while the call is under way');
    req.destroy();
    for (let n = 0; n < 100 && tenancy.ledger.available(owner.id) < before; n++) await new Promise((r) => setTimeout(r, 10));
    t.equal(tenancy.ledger.available(owner.id), before, 'given back once the client left');
  }
});

t.test('a client that stops reading is cut after about 10 s (uWS), and its upstream call with it', async (t) => {
  // The node answers eth_getLogs with a stream without end, as fast as the gateway takes it; the
  // gateway's own probes (chain id, head) get short answers.
  let answerClosedAt = 0;
  let requestedAt = 0;
  const node = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const call = JSON.parse(body) as { id: number; method: string };
      res.writeHead(200, { 'content-type': 'application/json' });
      if (call.method !== 'eth_getLogs') {
        res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, result: call.method === 'eth_chainId' ? '0x1' : '0x10' }));
        return;
      }
      requestedAt = Date.now();
      res.on('close', () => (answerClosedAt = Date.now()));
      res.write(`{"jsonrpc":"2.0","id":${call.id},"result":[`);
      const chunk = ('"0x' + 'ab'.repeat(31) + '",').repeat(1000);
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
  });
  await new Promise<void>((r) => node.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    node.closeAllConnections();
    return new Promise<void>((r) => node.close(() => r()));
  });
  const g = await gatewayFor(t, {
    chains: { devnet: evmChain([`http://127.0.0.1:${(node.address() as AddressInfo).port}`], 1, { timeout_s: 120 }) },
  });
  const { port } = new URL(g.base);
  const client = netConnect(Number(port), '127.0.0.1');
  client.on('error', () => {});
  t.teardown(() => client.destroy());
  const body = '{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{}]}';
  client.write(
    `POST /v1/rpc/public HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
  );
  // Never read: the client's receive buffer fills, then the gateway's send buffer, then the node's.
  client.pause();
  for (let i = 0; i < 400 && answerClosedAt === 0; i++) await new Promise((r) => setTimeout(r, 100));
  t.ok(requestedAt > 0, 'the call reached the node');
  t.ok(answerClosedAt > 0, "the node's answer was dropped within 40 s");
  const after = answerClosedAt - requestedAt;
  // Not at once (nothing else cuts a slow reader), and not at timeout_s (120 s): uWS's own ~10 s.
  t.ok(after >= 5_000 && after < 40_000, `the upstream call ended ${(after / 1000).toFixed(1)} s after it started`);
});

t.test('an upstream call past timeout_s is abandoned with 502', async (t) => {
  const upstream = await fakeUpstream(t, 'hang');
  const g = await gatewayFor(t, { chains: { devnet: evmChain([upstream.url], 1, { timeout_s: 1 }) } });
  const started = Date.now();
  const r = await rpc(`${g.base}/v1/rpc/public`, 'eth_blockNumber', [], 'slow');
  const took = Date.now() - started;
  t.equal(r.status, 502);
  t.same(r.json, { jsonrpc: '2.0', id: 'slow', error: { code: -32603, message: 'Upstream node error' } });
  t.ok(took >= 900 && took < 3000, `abandoned after about 1 s (${took} ms)`);
});

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

t.test('a 50 MB answer streams to a slow reader with bounded gateway memory, id restored', async (t) => {
  const SIZE = 50 * 1024 * 1024;
  // The node writes `id` after the large result, as some nodes do; the body is produced as the socket drains.
  const node = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const { id, method } = JSON.parse(body) as { id: number; method: string };
      // The gateway's head probe gets a head, as from any node: a 50 MB answer to it would fail the probe
      // and, on a slow machine, take the node out of rotation before the call below is made.
      if (method === 'eth_blockNumber') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(`{"jsonrpc":"2.0","id":${id},"result":"0x1"}`);
        return;
      }
      const head = '{"jsonrpc":"2.0","result":[';
      const tail = `],"id":${id}}`;
      const item = '"0x' + 'ab'.repeat(31) + '",';
      const count = Math.floor((SIZE - head.length - tail.length - 10) / item.length);
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': String(head.length + count * item.length - 1 + tail.length),
      });
      res.write(head);
      let sent = 0;
      const chunk = item.repeat(1000);
      const pump = (): void => {
        while (sent < count) {
          const n = Math.min(1000, count - sent);
          sent += n;
          const piece = n === 1000 ? chunk : item.repeat(n);
          const last = sent === count;
          const ok = res.write(last ? piece.slice(0, -1) + tail : piece);
          if (last) {
            res.end();
            return;
          }
          if (!ok) {
            res.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
  });
  await new Promise<void>((r) => node.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    node.closeAllConnections();
    return new Promise<void>((r) => node.close(() => r()));
  });
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-stream-'));
  const cfg = join(dir, 'config.yaml');
  writeFileSync(
    cfg,
    `server: { host: 127.0.0.1, port: 0 }\nstorage: { path: ${dir}/db.sqlite }\nchains:\n  devnet:\n    chain_id: 1\n    upstreams: [{ url: "http://127.0.0.1:${(node.address() as AddressInfo).port}" }]\n`,
  );
  const { child, port } = await startDaemon(t, cfg);
  // Warm the process up with a small call so the baseline includes what every request needs.
  await rpc(`http://127.0.0.1:${port}/v1/rpc/public`, 'eth_getLogs', [{}], 0).catch(() => undefined);
  const baseline = rssOf(child.pid!);
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(child.pid!))), 20);
  const clientId = '123456789012345678901234567890';
  const result = await new Promise<{ bytes: number; tail: string; status: number }>((resolve, reject) => {
    const req = httpRequest(
      `http://127.0.0.1:${port}/v1/rpc/public`,
      { method: 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        let bytes = 0;
        let tail = '';
        res.on('data', (d: Buffer) => {
          bytes += d.length;
          tail = (tail + d.toString('latin1')).slice(-200);
          // A slow reader: pause after every chunk so the gateway has to hold back the node.
          res.pause();
          setTimeout(() => res.resume(), 1);
        });
        res.on('end', () => resolve({ bytes, tail, status: res.statusCode ?? 0 }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(`{"jsonrpc":"2.0","id":${clientId},"method":"eth_getLogs","params":[{}]}`);
  });
  clearInterval(sampler);
  t.equal(result.status, 200);
  t.ok(result.bytes > 49 * 1024 * 1024, `the whole answer arrived (${result.bytes} bytes)`);
  t.ok(result.tail.endsWith(`],"id":${clientId}}`), 'the client id, written after the result, is restored exactly');
  const growth = peak - baseline;
  // Well under the answer's size; the margin covers garbage collection lagging on a loaded machine.
  t.ok(growth < 40 * 1024 * 1024, `gateway RSS grew by ${(growth / 1048576).toFixed(1)} MB for a 50 MB answer`);
});
