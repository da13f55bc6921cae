/**
 * The execution identity probe (eth_chainId) against a real anvil, and against a stand-in balancer that
 * mixes answers up, which a real node cannot be made to do.
 */
import t from 'tap';
import { readEvmHead } from '../../src/upstreams/head-probe.js';
import { createHttpUpstream } from '../../src/upstreams/http-client.js';
import { readEvmIdentity } from '../../src/upstreams/identity-probe.js';
import { echoId, fakeUpstream, rpcIdOf } from '../support/fake-upstream.js';
import { anvilFor } from '../support/gateway.js';

function answer(body: string): string {
  return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
}

const CHAIN_ID = '{"jsonrpc":"2.0","id":1,"result":"0x7a69"}';
const BLOCK_NUMBER = '{"jsonrpc":"2.0","id":1,"result":"0x10"}';

t.test("a node's chain id, as a decimal string", async (t) => {
  const node = await anvilFor(t);
  const u = createHttpUpstream({ url: node.url });
  t.teardown(() => u.close());
  t.equal(await readEvmIdentity(u, 2500, new AbortController().signal), '31337');
});

t.test("a balancer that swaps two probes' answers gives neither a verdict", async (t) => {
  // It holds the two probes until both came (each alone on its socket: probes go out exclusive), then
  // answers each with the other's answer, its id echoed as a node would: eth_chainId gets the block number
  // 0x10, a well-formed QUANTITY that would read as chain 16.
  const held: Array<{ write: (text: string) => void; request: string }> = [];
  const node = await fakeUpstream(t, (socket, request) => {
    held.push({ write: (text) => socket.write(text), request });
    if (held.length < 2) return;
    for (const [i, { write }] of held.entries()) {
      const other = held[1 - i]!.request;
      write(answer(echoId(other, other.includes('eth_chainId') ? CHAIN_ID : BLOCK_NUMBER)));
    }
  });
  const u = createHttpUpstream({ url: node.url });
  t.teardown(() => u.close());
  const signal = new AbortController().signal;
  const [identity, head] = await Promise.allSettled([readEvmIdentity(u, 2500, signal), readEvmHead(u, 2500, signal)]);
  t.equal(node.requests.length, 2);
  t.not(rpcIdOf(node.requests[0]!), rpcIdOf(node.requests[1]!), 'the probes carry different ids');
  t.equal(identity.status, 'rejected', 'no chain verdict from an answer that is not its own');
  t.match((identity as PromiseRejectedResult).reason, /another call's id/);
  t.equal(head.status, 'rejected');
  t.match((head as PromiseRejectedResult).reason, /another call's id/);
});

t.test('an eth_chainId answer with its own id is read; with another id it fails the probe', async (t) => {
  let shift = 0;
  const node = await fakeUpstream(t, (socket, request) => {
    const id = Number(rpcIdOf(request)) + shift;
    socket.write(answer(CHAIN_ID.replace('"id":1', `"id":${id}`)));
  });
  const u = createHttpUpstream({ url: node.url });
  t.teardown(() => u.close());
  t.equal(await readEvmIdentity(u, 2500, new AbortController().signal), '31337');
  shift = 1;
  await t.rejects(readEvmIdentity(u, 2500, new AbortController().signal), /another call's id/);
  shift = 0;
  t.equal(await readEvmIdentity(u, 2500, new AbortController().signal), '31337');
  t.equal(node.connections, 2, 'the socket of the mixed-up answer was closed: the next probe opened another');
});
