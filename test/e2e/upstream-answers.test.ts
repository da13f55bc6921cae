/**
 * Upstream answers are not trusted blindly (issue 28, part 4): a node that drips its answer holds a call no
 * longer than answer_timeout_s, and an answer that is not the call's (another id, two ids, none) never reaches
 * the client as its own, whether single, a batch item, pipelined or streamed. Each such answer is a 502 in the
 * usual shape, a failure in the node's health, one log line per condition, and the socket it came on closed.
 * Fake nodes on real sockets: a real node cannot be made to do any of this.
 */
import t, { type Test } from 'tap';
import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { fakeUpstream, rpcIdOf } from '../support/fake-upstream.js';
import { gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, send } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';

interface Call {
  id: string;
  method: string;
  params: unknown[];
}

type Answer = (socket: Socket, call: Call) => void;

function callOf(request: string): Call {
  const parsed = JSON.parse(request.slice(request.indexOf('\r\n\r\n') + 4)) as { method: string; params: unknown[] };
  return { id: rpcIdOf(request), method: parsed.method, params: parsed.params };
}

function httpOk(socket: Socket, body: string): void {
  socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

/** The answer a sound node gives: the call's id, and for eth_getBalance its address as the result. */
function soundBody(call: Call): string {
  const result = call.method === 'eth_chainId' ? '0x1' : call.method === 'eth_blockNumber' ? '0x10' : call.params[0];
  return JSON.stringify({ jsonrpc: '2.0', id: Number(call.id), result });
}

const sound: Answer = (socket, call) => httpOk(socket, soundBody(call));

/**
 * A node that answers the gateway's own probes soundly and the clients' eth_getBalance calls with `answer`;
 * it records which sockets closed, and the calls it got.
 */
async function nodeWith(t: Test, answer: Answer) {
  const closed = new Set<Socket>();
  const calls: Array<{ socket: Socket; call: Call }> = [];
  const node = await fakeUpstream(t, (socket, request) => {
    if (calls.every((c) => c.socket !== socket)) socket.on('close', () => closed.add(socket));
    const call = callOf(request);
    calls.push({ socket, call });
    if (call.method === 'eth_getBalance') answer(socket, call);
    else sound(socket, call);
  });
  return { url: node.url, closed, calls, balanceCalls: () => calls.filter((c) => c.call.method === 'eth_getBalance') };
}

async function gatewayOver(t: Test, url: string, chain: Record<string, unknown> = {}): Promise<TestGateway> {
  // One thread: the calls' health and logs are then the ones /healthz and the log show at once.
  return gatewayFor(t, { server: { workers: 1 }, chains: { devnet: { chain_id: 1, upstreams: [{ url }], ...chain } } });
}

const address = (n: number): string => `0x${n.toString(16).padStart(40, '0')}`;
const balanceCall = (id: string | number, n: number) => ({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [address(n), 'latest'] });
const upstreamError = (id: unknown) => ({ jsonrpc: '2.0', id, error: { code: -32603, message: 'Upstream node error' } });

async function errorRate(g: TestGateway): Promise<number> {
  const health = (await send('GET', `${g.base}/healthz`)).json as { chains: Record<string, { upstreams: Array<{ error_rate: number }> }> };
  return health.chains.devnet!.upstreams[0]!.error_rate;
}

/** A POST whose answer may be cut: the bytes received, and whether the response completed. */
function postMaybeCut(url: string, body: string): Promise<{ status: number; text: string; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      const done = (complete: boolean): void => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString(), complete });
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => done(res.complete));
      res.on('error', () => done(false));
      res.on('aborted', () => done(false));
    });
    req.on('error', reject);
    req.end(body);
  });
}

t.test('a node dripping its answer: 502 at answer_timeout_s, a failure in its health, its socket closed', async (t) => {
  const node = await nodeWith(t, (socket, call) => {
    const body = soundBody(call);
    socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`);
    // One byte every 300 ms: never silent for timeout_s (1 s), and 15 s for the whole answer.
    let at = 0;
    const drip = setInterval(() => {
      if (socket.destroyed || at === body.length) clearInterval(drip);
      else socket.write(body[at++]!);
    }, 300);
    socket.on('close', () => clearInterval(drip));
  });
  const g = await gatewayOver(t, node.url, { timeout_s: 1, answer_timeout_s: 2 });
  t.equal(await errorRate(g), 0, 'no failure before the call');
  const started = Date.now();
  const r = await post(`${g.base}/v1/rpc/public`, JSON.stringify(balanceCall(7, 1)));
  const took = Date.now() - started;
  t.equal(r.status, 502);
  t.same(r.json, upstreamError(7), 'the usual 502 answer, with the client id');
  // The sweep runs every 100 ms and may be late by up to two of them; a loaded machine adds to it.
  t.ok(took >= 2000 && took < 5000, `answered after answer_timeout_s (took ${took} ms)`);
  t.ok((await errorRate(g)) > 0, 'the node has a failure in its health');
  const dripped = node.balanceCalls()[0]!.socket;
  await waitFor(() => node.closed.has(dripped), { what: 'the socket that dripped is closed', ms: 2000 });
});

t.test('answer_timeout_s defaults to 4 x timeout_s', async (t) => {
  const node = await nodeWith(t, sound);
  const g = await gatewayOver(t, node.url, { timeout_s: 7 });
  t.equal(g.gateway.context.chains.get('devnet')!.config.answer_timeout_s, 28);
});

t.test("an answer with another call's id is a 502, a failure, one log line, and its socket closed", async (t) => {
  const node = await nodeWith(t, (socket, call) => httpOk(socket, soundBody({ ...call, id: String(Number(call.id) + 1) })));
  const g = await gatewayOver(t, node.url);
  for (const id of [7, 8]) {
    const r = await post(`${g.base}/v1/rpc/public`, JSON.stringify(balanceCall(id, id)));
    t.equal(r.status, 502);
    t.same(r.json, upstreamError(id), `call ${id}: the usual 502 answer, never the node's`);
  }
  t.ok((await errorRate(g)) > 0, 'the node has failures in its health');
  for (const { socket } of node.balanceCalls())
    await waitFor(() => node.closed.has(socket), { what: 'the socket it came on is closed', ms: 2000 });
  const lines = g.logLines.filter((l) => l.includes("upstream answers carry other calls' ids"));
  t.equal(lines.length, 1, 'one log line for the condition, not one per call');
  t.match(lines[0], /devnet/);
});

t.test('an answer with two top-level ids is refused, before or after the result', async (t) => {
  const node = await nodeWith(t, (socket, call) => {
    const n = Number(BigInt(call.params[0] as string));
    httpOk(
      socket,
      n === 1
        ? `{"jsonrpc":"2.0","id":${call.id},"result":"0x1","id":999}`
        : `{"jsonrpc":"2.0","id":${call.id},"id":${call.id},"result":"0x2"}`,
    );
  });
  const g = await gatewayOver(t, node.url);
  for (const n of [1, 2]) {
    const r = await post(`${g.base}/v1/rpc/public`, JSON.stringify(balanceCall(`"c${n}"`, n)));
    t.equal(r.status, 502, `id twice (${n === 1 ? 'after' : 'before'} the result)`);
    t.same(r.json, upstreamError(`"c${n}"`));
  }
});

t.test('a batch whose items come back without their id, with an extra one, or with a sibling item’s id', async (t) => {
  // Item n's answer: 1 sound, 2 no id, 3 an extra top-level id, 4 the id of item 1 (two answers with one id).
  let firstId = '';
  const node = await nodeWith(t, (socket, call) => {
    const n = Number(BigInt(call.params[0] as string));
    if (n === 1) firstId = call.id;
    const body =
      n === 2
        ? `{"jsonrpc":"2.0","result":"${address(n)}"}`
        : n === 3
          ? `{"jsonrpc":"2.0","id":${call.id},"result":"${address(n)}","id":${call.id}}`
          : n === 4
            ? `{"jsonrpc":"2.0","id":${firstId},"result":"${address(n)}"}`
            : soundBody(call);
    httpOk(socket, body);
  });
  const g = await gatewayOver(t, node.url);
  const batch = [1, 2, 3, 4].map((n) => balanceCall(`"item-${n}"`, n));
  const r = await post(`${g.base}/v1/rpc/public`, JSON.stringify(batch));
  t.equal(r.status, 200, 'one item was answered');
  t.same(r.json, [
    { jsonrpc: '2.0', id: '"item-1"', result: address(1) },
    upstreamError('"item-2"'),
    upstreamError('"item-3"'),
    upstreamError('"item-4"'),
  ]);
});

t.test('pipelined answers swapped on one socket never reach each other’s client', async (t) => {
  // Calls that arrive together on a socket are answered in reverse order; a lone call soundly.
  const held = new Map<Socket, Call>();
  const node = await nodeWith(t, (socket, call) => {
    const first = held.get(socket);
    if (first !== undefined) {
      held.delete(socket);
      sound(socket, call);
      sound(socket, first);
      return;
    }
    held.set(socket, call);
    setTimeout(() => {
      if (held.get(socket) !== call) return;
      held.delete(socket);
      if (!socket.destroyed) sound(socket, call);
    }, 200);
  });
  const g = await gatewayOver(t, node.url);
  const r = await post(`${g.base}/v1/rpc/public`, JSON.stringify([balanceCall('"x"', 1), balanceCall('"y"', 2)]));
  const items = r.json as Array<{ id: string; result?: string }>;
  t.equal(items.length, 2);
  const pipelined = node.balanceCalls().filter((c) => c.socket === node.balanceCalls()[0]!.socket);
  t.equal(pipelined.length, 2, 'both calls went out pipelined on one socket');
  for (const [i, item] of items.entries()) {
    const n = i + 1;
    if (item.result !== undefined) t.equal(item.result, address(n), `item ${item.id} has its own answer`);
    else t.same(item, upstreamError(item.id), `item ${item.id}: the usual 502 answer`);
  }
  t.same(items[0], upstreamError('"x"'), "the first call got the second's answer: refused");
  await waitFor(() => node.closed.has(pipelined[0]!.socket), { what: 'the socket that mixed them up is closed', ms: 2000 });
});

t.test('a streamed answer (over 64 KiB) with a wrong or second id is cut, never completed', async (t) => {
  const big = `0x${'ab'.repeat(50_000)}`;
  const node = await nodeWith(t, (socket, call) => {
    const n = Number(BigInt(call.params[0] as string));
    const body =
      n === 1
        ? `{"jsonrpc":"2.0","result":"${big}","id":${Number(call.id) + 1}}`
        : n === 2
          ? `{"jsonrpc":"2.0","id":${call.id},"result":"${big}","id":5}`
          : `{"jsonrpc":"2.0","id":${call.id},"result":"${big}"}`;
    // The first 80 KB, then the rest: the gateway has begun the client's answer when it meets the end.
    socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 80_000)}`);
    setTimeout(() => socket.write(body.slice(80_000)), 100);
  });
  const g = await gatewayOver(t, node.url);
  for (const n of [1, 2]) {
    const r = await postMaybeCut(`${g.base}/v1/rpc/public`, JSON.stringify(balanceCall(3, n)));
    t.notOk(r.complete, `answer ${n}: the client's answer is cut`);
    t.notMatch(r.text.slice(-20), /"id":\d+\}$/, `answer ${n}: its end never reaches the client`);
  }
  const ok = await postMaybeCut(`${g.base}/v1/rpc/public`, JSON.stringify(balanceCall(3, 3)));
  t.ok(ok.complete, 'a sound streamed answer completes');
  t.same(JSON.parse(ok.text), { jsonrpc: '2.0', id: 3, result: big });
});
