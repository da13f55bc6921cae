/**
 * The rule a reload closes a retired chain runtime by (server/gateway-thread.ts callsInFlight): a client call in
 * flight on its nodes, or an answer still streaming from one, keeps it open; its own probes on the nodes' sockets
 * (a hanging node keeps one in flight most of the time) do not.
 */
import t from 'tap';
import type { AnswerSink } from '../../src/pipeline/forward.js';
import { methodRow } from '../../src/jsonrpc/methods.js';
import { routeCall } from '../../src/pipeline/route-call.js';
import { callsInFlight } from '../../src/server/gateway-thread.js';
import type { HttpUpstream, RequestHandle, ResponseSink } from '../../src/upstreams/http-client.js';
import { createChainHealth } from '../../src/upstreams/selection.js';

/** A node whose socket always has a probe in flight, and whose answer to a call streams until `finish()`. */
function node(): HttpUpstream & { sink: ResponseSink | null; id: number } {
  const self = {
    label: 'a',
    sink: null as ResponseSink | null,
    id: 0,
    request(req: { body?: unknown }, sink: ResponseSink): RequestHandle {
      self.sink = sink;
      self.id = (JSON.parse(String(req.body)) as { id: number }).id;
      return { abort() {}, resume() {}, distrust() {} };
    },
    stats: () => ({ open: 1, busy: 1, queued: 0 }),
    close() {},
  };
  return self as never;
}

function chainOf(upstream: HttpUpstream) {
  const health = createChainHealth(['a'], { maxLagBlocks: 5, random: () => 0 });
  return { upstreams: [upstream], health, timeoutMs: 2000, freshHead: () => null, noteWrite() {} };
}

/** The head and first bytes of a large answer (one forwardCall streams rather than holds whole). */
function startAnswer(up: { sink: ResponseSink | null; id: number }): void {
  up.sink!.onHead(200, [], undefined);
  up.sink!.onData(Buffer.from(`{"jsonrpc":"2.0","id":${up.id},"result":"0x`));
  up.sink!.onData(Buffer.alloc(100_000, 0x61));
}

const sink = (): AnswerSink & { ended: boolean } => {
  const s = {
    ended: false,
    whole() {},
    begin() {},
    chunk: () => true,
    end() {
      s.ended = true;
    },
    fail() {
      s.ended = true;
    },
  };
  return s;
};

t.test("a node's own probe on its socket does not hold a retired chain open", async (t) => {
  t.equal(callsInFlight(chainOf(node())), false);
});

t.test('a call in flight, then its answer streaming, holds it open until the answer ends', async (t) => {
  const up = node();
  const chain = chainOf(up);
  const out = sink();
  routeCall(chain, methodRow('eth_getLogs')!, '[{}]', '1', out);
  t.equal(callsInFlight(chain), true, 'sent, not answered');
  startAnswer(up);
  t.equal(chain.health.upstreams[0]!.inflight, 0, 'settled in health at its head');
  t.equal(callsInFlight(chain), true, 'its body still streams');
  up.sink!.onData(Buffer.from('"}'));
  up.sink!.onEnd();
  t.ok(out.ended, 'the client heard its end');
  t.equal(callsInFlight(chain), false, 'the answer ended');
});

t.test('a streamed answer cut by the node, or left by its client, no longer holds it', async (t) => {
  const up = node();
  const chain = chainOf(up);
  routeCall(chain, methodRow('eth_getLogs')!, '[{}]', '1', sink());
  startAnswer(up);
  t.equal(callsInFlight(chain), true, 'streaming');
  up.sink!.onError(Object.assign(new Error('cut'), { kind: 'reset' }) as never);
  t.equal(callsInFlight(chain), false, 'cut');
  const left = routeCall(chain, methodRow('eth_getLogs')!, '[{}]', '2', sink());
  startAnswer(up);
  t.equal(callsInFlight(chain), true, 'streaming');
  left.abort();
  t.equal(callsInFlight(chain), false, 'the client left');
});
