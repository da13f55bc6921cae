/**
 * Head probes against a real anvil, and against HTTP stand-ins for what a node cannot be made to answer:
 * no head, a huge answer, an error status, silence.
 */
import t, { type Test } from 'tap';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_PROBE_ANSWER_BYTES, readBeaconHead, readEvmHead } from '../../src/upstreams/head-probe.js';
import { createHttpUpstream } from '../../src/upstreams/http-client.js';
import { anvilFor } from '../support/gateway.js';
import { waitFor } from '../support/wait-for.js';

async function standIn(t: Test, answer: (res: ServerResponse, body: string) => void): Promise<{ url: string; closed: () => number }> {
  let closed = 0;
  const server = createServer((req, res) => {
    res.on('close', () => closed++);
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => answer(res, body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, closed: () => closed };
}

const json =
  (body: unknown) =>
  (res: ServerResponse): void => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };

/** A JSON-RPC answer carrying the id of the call it answers, as a node echoes it. */
const rpc =
  (answer: Record<string, unknown>) =>
  (res: ServerResponse, body: string): void =>
    json({ jsonrpc: '2.0', id: (JSON.parse(body) as { id: unknown }).id, ...answer })(res);

function upstream(t: Test, url: string) {
  const u = createHttpUpstream({ url });
  t.teardown(() => u.close());
  return u;
}

t.test("an execution node's block number", async (t) => {
  const node = await anvilFor(t);
  const u = upstream(t, node.url);
  t.equal(await readEvmHead(u, 2500, new AbortController().signal), 0);
  await fetch(node.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"jsonrpc":"2.0","id":1,"method":"anvil_mine","params":["0x2a"]}',
  });
  t.equal(await readEvmHead(u, 2500, new AbortController().signal), 42);
});

t.test("a beacon node's head slot", async (t) => {
  const s = await standIn(t, json({ data: { root: '0x00', header: { message: { slot: '123456', proposer_index: '1' } } } }));
  t.equal(await readBeaconHead(upstream(t, s.url), 2500, new AbortController().signal), 123456);
});

t.test('answers that hold no head reject', async (t) => {
  const cases: Array<[string, (res: ServerResponse, body: string) => void, RegExp]> = [
    ['a null result', rpc({ result: null }), /no block number/],
    ['an error object', rpc({ error: { code: -32601, message: 'no' } }), /no block number/],
    ['a decimal string', rpc({ result: '42' }), /no block number/],
    ['HTTP 503', (res) => res.writeHead(503).end('busy'), /HTTP 503/],
    ['not JSON', (res) => res.writeHead(200).end('<html>'), /not JSON/],
  ];
  for (const [what, answer, error] of cases) {
    const s = await standIn(t, answer);
    await t.rejects(readEvmHead(upstream(t, s.url), 2500, new AbortController().signal), error, what);
  }
  const beacon = await standIn(t, json({ data: { header: { message: { slot: 12 } } } }));
  await t.rejects(
    readBeaconHead(upstream(t, beacon.url), 2500, new AbortController().signal),
    /no slot/,
    'a slot that is not a decimal string',
  );
});

t.test("an answer carrying another call's id is no head, and its socket is closed", async (t) => {
  const ids: unknown[] = [];
  const cases: Array<[string, (sent: number) => unknown]> = [
    ['the next id', (sent) => sent + 1],
    ['the id as a string', (sent) => String(sent)],
    ['no id', () => undefined],
  ];
  for (const [what, idFor] of cases) {
    const s = await standIn(t, (res, body) => {
      const sent = (JSON.parse(body) as { id: number }).id;
      ids.push(sent);
      json({ jsonrpc: '2.0', id: idFor(sent), result: '0x2a' })(res);
    });
    await t.rejects(readEvmHead(upstream(t, s.url), 2500, new AbortController().signal), /another call's id/, what);
    await waitFor(() => s.closed() > 0, { what: `${what}: the socket closed`, ms: 1000 });
    t.equal(s.closed(), 1, `${what}: the socket is closed, its answers out of step`);
  }
  t.equal(new Set(ids).size, 3, 'each probe carries its own id, from the gateway sequence');
});

t.test('a huge answer is dropped after its first bytes, its socket closed', async (t) => {
  const s = await standIn(t, (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    const pump = (): void => {
      while (sent < 50 * 1024 * 1024 && !res.destroyed) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  await t.rejects(readEvmHead(upstream(t, s.url), 2500, new AbortController().signal), new RegExp(`larger than ${MAX_PROBE_ANSWER_BYTES}`));
  await waitFor(() => s.closed() > 0, { what: 'the connection closed', ms: 1000 });
  t.equal(s.closed(), 1, 'the connection is closed, not read to the end');
});

t.test('an abort gives up a silent node at once', async (t) => {
  const s = await standIn(t, () => {});
  const controller = new AbortController();
  const probe = readEvmHead(upstream(t, s.url), 30_000, controller.signal);
  setTimeout(() => controller.abort(), 50);
  const started = Date.now();
  await t.rejects(probe, /aborted/);
  t.ok(Date.now() - started < 1000, 'well before its 30 s timeout');
  await t.rejects(readEvmHead(upstream(t, s.url), 30_000, controller.signal), /aborted/, 'an aborted signal sends nothing');
});
