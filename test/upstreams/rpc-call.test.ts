/** The gateway's own calls (callUpstream) take an answer only when it carries the id they were sent with. */
import t from 'tap';
import type { Socket } from 'node:net';
import { createHttpUpstream } from '../../src/upstreams/http-client.js';
import { callUpstream } from '../../src/upstreams/rpc-call.js';
import { fakeUpstream, rpcIdOf } from '../support/fake-upstream.js';
import { waitFor } from '../support/wait-for.js';

function httpOk(socket: Socket, body: string): void {
  socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

t.test("callUpstream refuses an answer with another call's id, or a second id, and closes its socket", async (t) => {
  const closed = new Set<Socket>();
  const answers: Record<string, (id: string) => string> = {
    eth_chainId: (id) => `{"jsonrpc":"2.0","id":${id},"result":"0x1"}`,
    eth_gasPrice: (id) => `{"jsonrpc":"2.0","id":${Number(id) + 1},"result":"0x2"}`,
    eth_blockNumber: (id) => `{"jsonrpc":"2.0","id":${id},"result":"0x3","id":999}`,
  };
  const sockets: Socket[] = [];
  const node = await fakeUpstream(t, (socket, request) => {
    if (!sockets.includes(socket)) {
      sockets.push(socket);
      socket.on('close', () => closed.add(socket));
    }
    const method = /"method":"([^"]+)"/.exec(request)![1]!;
    httpOk(socket, answers[method]!(rpcIdOf(request)));
  });
  const upstream = createHttpUpstream({ url: node.url });
  t.teardown(() => upstream.close());
  t.equal(await callUpstream(upstream, 2000, 'eth_chainId', []), '0x1', "the call's own answer");
  await t.rejects(callUpstream(upstream, 2000, 'eth_gasPrice', []), /another call's id/);
  await waitFor(() => closed.has(sockets[0]!), { what: 'the socket it came on is closed', ms: 2000 });
  await t.rejects(callUpstream(upstream, 2000, 'eth_blockNumber', []), /another call's id/, 'a second id read last');
  t.equal(await callUpstream(upstream, 2000, 'eth_chainId', []), '0x1', 'calls go on, on a new socket');
});
