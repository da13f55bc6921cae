/**
 * OpenTelemetry traces end to end (config `tracing`, docs/failover.md "Tracing"): spans read back from an
 * OTLP/HTTP receiver on a local port, in front of a real anvil and a node that answers 500 to eth_getBalance
 * (so a call's retry shows as a second attempt). The key never appears in what is sent, nor a node's URL;
 * sample_ratio 0 sends nothing; with tracing off, nothing connects to the receiver.
 */
import t, { type Test } from 'tap';
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../../src/config/schema.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { tracing } from '../../src/pipeline/tracing.js';
import { anvilFor, gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, rpc } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';
import { openSocket, wsUrl } from '../support/ws.js';

interface OtlpValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Array<{ key: string; value: OtlpValue }>;
}
interface OtlpBody {
  resourceSpans: Array<{ resource: { attributes: Array<{ key: string; value: OtlpValue }> }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
}

/** An OTLP/HTTP traces receiver (JSON, as the exporter sends by default): every body and connection it got. */
async function otlpReceiver(t: Test): Promise<{ url: string; bodies: string[]; connections: () => number; spans: () => OtlpSpan[] }> {
  const bodies: string[] = [];
  let connections = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString());
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const spans = (): OtlpSpan[] =>
    bodies.flatMap((b) => (JSON.parse(b) as OtlpBody).resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, bodies, connections: () => connections, spans };
}

/** A node that relays to `target` but answers eth_getBalance with HTTP 500 (or never: `hang`); counts those. */
async function failingBalances(t: Test, target: string, hang = false): Promise<{ url: string; refused: () => number }> {
  let refused = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      if (body.includes('"eth_getBalance"')) {
        refused++;
        if (hang) return;
        res.writeHead(500, { 'content-type': 'text/plain' }).end('node trouble');
        return;
      }
      fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
        .then(async (r) => res.writeHead(r.status, { 'content-type': 'application/json' }).end(await r.text()))
        .catch(() => res.writeHead(502).end());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, refused: () => refused };
}

function keyFor(g: TestGateway): string {
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('traced', 'growth', 1_000_000);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, 'devnet', 'traced', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  return made.apiKey;
}

const attr = (s: OtlpSpan, key: string): string | number | undefined => {
  const v = s.attributes.find((a) => a.key === key)?.value;
  if (v === undefined) return undefined;
  return v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.doubleValue);
};

/** An address of its own per call, so no two calls are one shared read. */
const addressFor = (i: number): string => `0x${(0x2000 + i).toString(16).padStart(40, '0')}`;

t.test('a span per call with its attributes, a child per upstream attempt, a retry as a second child', async (t) => {
  const node = await anvilFor(t);
  const bad = await failingBalances(t, node.url);
  const receiver = await otlpReceiver(t);
  const g = await gatewayFor(t, {
    // One thread: the spans' tracer is this process's (each worker thread has its own).
    server: { workers: 1 },
    tracing: { otlp_endpoint: receiver.url, sample_ratio: 1, service_name: 'gate-under-test' },
    chains: {
      devnet: {
        chain_id: 31337,
        upstreams: [
          { name: 'good', url: node.url },
          { name: 'bad', url: bad.url },
        ],
      },
    },
  });
  const apiKey = keyFor(g);
  const url = `${g.base}/v1/rpc/${apiKey}`;
  // Calls until one went first to the failing node (which node goes first is the rotation's choice).
  let i = 0;
  // Bounded in time, not count: the failing node takes `latest` reads only once its first probe gave its head.
  const until = Date.now() + 15_000;
  while (bad.refused() === 0 && Date.now() < until) {
    const r = await rpc(url, 'eth_getBalance', [addressFor(i++), 'latest']);
    t.equal(r.status, 200, 'answered, by the good node at the latest');
  }
  t.ok(bad.refused() > 0, 'a call went to the failing node first');
  // A batch of two: a span per item.
  const batch = JSON.stringify([
    { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] },
    { jsonrpc: '2.0', id: 2, method: 'eth_getBalance', params: [addressFor(100), 'latest'] },
  ]);
  t.equal((await post(url, batch)).status, 200);
  // A refusal before any node: a span of its own, with the error code.
  t.equal((await rpc(url, 'eth_notAMethod')).status, 200);
  // A call over a WebSocket: a span as over HTTP, with its attempt.
  const sock = await openSocket(t, wsUrl(g.base, `/v1/rpc/${apiKey}`));
  const overWs = (await sock.call({ jsonrpc: '2.0', id: 7, method: 'eth_getTransactionCount', params: [addressFor(200), 'latest'] })) as {
    result?: string;
  };
  t.type(overWs.result, 'string', 'answered over the WebSocket');
  // The graceful stop flushes what is buffered.
  await g.gateway.stop();
  t.equal(tracing, null, 'tracing is off after the stop');
  await waitFor(() => receiver.spans().length > 0, { ms: 10_000, what: 'spans at the receiver' });
  const spans = receiver.spans();
  const calls = spans.filter((s) => s.parentSpanId === undefined || s.parentSpanId === '');
  const attempts = spans.filter((s) => s.name === 'upstream attempt');
  const balances = calls.filter((s) => s.name === 'eth_getBalance');
  t.equal(balances.length, i + 1, 'one span per eth_getBalance call, batch item included');
  for (const s of balances) {
    t.equal(attr(s, 'chaingate.chain'), 'devnet');
    t.equal(attr(s, 'rpc.method'), 'eth_getBalance');
    t.equal(attr(s, 'chaingate.key_prefix'), apiKey.slice(0, 8), 'the key by its prefix');
    t.equal(attr(s, 'chaingate.outcome'), 'ok');
    t.equal(attr(s, 'http.response.status_code'), 200);
    t.ok(Number(attr(s, 'chaingate.ru')) > 0, 'its RU');
    const children = attempts.filter((a) => a.parentSpanId === s.spanId && a.traceId === s.traceId);
    t.ok(children.length >= 1, 'at least one attempt under the call');
    t.equal(attr(children[0]!, 'chaingate.attempt'), 'first');
  }
  const retried = balances.filter((s) => attempts.filter((a) => a.parentSpanId === s.spanId).length === 2);
  t.ok(retried.length >= 1, 'a call with two attempts');
  const pair = attempts.filter((a) => a.parentSpanId === retried[0]!.spanId);
  const first = pair.find((a) => attr(a, 'chaingate.attempt') === 'first')!;
  const retry = pair.find((a) => attr(a, 'chaingate.attempt') === 'retry')!;
  t.equal(attr(first, 'chaingate.node'), 'bad');
  t.equal(attr(first, 'chaingate.outcome'), 'status');
  t.equal(attr(first, 'http.response.status_code'), 500);
  t.equal(attr(retry, 'chaingate.node'), 'good');
  t.equal(attr(retry, 'chaingate.outcome'), 'ok');
  const refused = calls.find((s) => attr(s, 'chaingate.outcome') === 'method_not_found');
  t.ok(refused, 'a refused call has a span with its error code');
  t.equal(refused === undefined ? -1 : attempts.filter((a) => a.parentSpanId === refused.spanId).length, 0, 'and no attempt');
  const ws = calls.find((s) => s.name === 'eth_getTransactionCount');
  t.equal(ws === undefined ? undefined : attr(ws, 'chaingate.transport'), 'ws', 'the WebSocket call has its span');
  t.equal(ws === undefined ? 0 : attempts.filter((a) => a.parentSpanId === ws.spanId).length, 1, 'with its attempt');
  const payload = receiver.bodies.join('\n');
  t.ok(payload.includes('gate-under-test'), 'service.name as configured');
  t.notOk(payload.includes(apiKey), 'the key is nowhere in what was sent');
  t.notOk(payload.includes(node.url) || payload.includes(bad.url), "no node's URL either");
});

t.test('a hedge beside a silent first attempt; worker threads export their own spans', async (t) => {
  const node = await anvilFor(t);
  const silent = await failingBalances(t, node.url, true);
  const receiver = await otlpReceiver(t);
  const g = await gatewayFor(t, {
    // Two worker threads (dist/ built): each has its tracer, exporting to the same receiver.
    server: { workers: 2 },
    tracing: { otlp_endpoint: receiver.url, sample_ratio: 1 },
    chains: {
      devnet: {
        chain_id: 31337,
        timeout_s: 1,
        upstreams: [
          { name: 'good', url: node.url },
          { name: 'silent', url: silent.url },
        ],
      },
    },
  });
  const url = `${g.base}/v1/rpc/${keyFor(g)}`;
  let i = 0;
  // Calls until one lands on the silent node: a `latest` read goes only to nodes whose head is known, and on a
  // loaded machine the silent node's first probe may come after the first calls; bounded in time, not count.
  const until = Date.now() + 15_000;
  while (silent.refused() === 0 && Date.now() < until) t.equal((await rpc(url, 'eth_getBalance', [addressFor(i++), 'latest'])).status, 200);
  t.ok(silent.refused() > 0, 'a call went to the silent node first');
  await g.gateway.stop();
  await waitFor(() => receiver.spans().some((s) => s.name === 'upstream attempt'), { ms: 10_000, what: 'attempt spans' });
  const attempts = receiver.spans().filter((s) => s.name === 'upstream attempt');
  const hedge = attempts.find((a) => attr(a, 'chaingate.attempt') === 'hedge');
  t.ok(hedge, 'a hedge attempt');
  t.equal(hedge === undefined ? undefined : attr(hedge, 'chaingate.node'), 'good', 'on the good node');
  const first = attempts.find((a) => a.parentSpanId === hedge?.parentSpanId && attr(a, 'chaingate.attempt') === 'first');
  t.equal(first === undefined ? undefined : attr(first, 'chaingate.node'), 'silent', 'beside the silent first attempt');
  t.equal(first === undefined ? undefined : attr(first, 'chaingate.outcome'), 'dropped', 'which was dropped once the hedge answered');
  t.equal(receiver.spans().filter((s) => s.name === 'eth_getBalance').length, i, 'a span per call across the threads');
});

t.test('a call whose client left ends as abandoned, its attempt dropped', async (t) => {
  const node = await anvilFor(t);
  const silent = await failingBalances(t, node.url, true);
  const receiver = await otlpReceiver(t);
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    tracing: { otlp_endpoint: receiver.url, sample_ratio: 1 },
    chains: { devnet: { chain_id: 31337, timeout_s: 30, upstreams: [{ name: 'silent', url: silent.url }] } },
  });
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [addressFor(1), 'latest'] });
  const req = request(`${g.base}/v1/rpc/${keyFor(g)}`, { method: 'POST', headers: { 'content-type': 'application/json' } });
  req.on('error', () => undefined);
  req.end(body);
  await waitFor(() => silent.refused() > 0, { what: 'the call at the silent node' });
  req.destroy();
  await waitFor(() => g.gateway.context.inFlight === 0, { what: 'the request dropped' });
  await g.gateway.stop();
  await waitFor(() => receiver.spans().some((s) => s.name === 'eth_getBalance'), { ms: 10_000, what: 'the call span' });
  const call = receiver.spans().find((s) => s.name === 'eth_getBalance')!;
  t.equal(attr(call, 'chaingate.outcome'), 'abandoned');
  t.equal(attr(call, 'http.response.status_code'), 499);
  const attempt = receiver.spans().find((s) => s.parentSpanId === call.spanId);
  t.equal(attempt === undefined ? undefined : attr(attempt, 'chaingate.outcome'), 'dropped', 'its attempt dropped');
});

t.test('sample_ratio 0 sends nothing', async (t) => {
  const node = await anvilFor(t);
  const receiver = await otlpReceiver(t);
  const g = await gatewayFor(t, {
    server: { workers: 1 },
    tracing: { otlp_endpoint: receiver.url, sample_ratio: 0 },
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url }] } },
  });
  const url = `${g.base}/v1/rpc/${keyFor(g)}`;
  t.not(tracing, null, 'tracing is on');
  for (let i = 0; i < 20; i++) t.equal((await rpc(url, 'eth_getBalance', [addressFor(i), 'latest'])).status, 200);
  await g.gateway.stop();
  t.equal(receiver.bodies.length, 0, 'no span was sent');
});

t.test('a reload turns tracing on and off again without a restart, with two worker threads', async (t) => {
  const node = await anvilFor(t);
  const receiver = await otlpReceiver(t);
  const g = await gatewayFor(t, { server: { workers: 2 }, chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url }] } } });
  const url = `${g.base}/v1/rpc/${keyFor(g)}`;
  const calls = async (from: number): Promise<void> => {
    for (let i = from; i < from + 12; i++) t.equal((await rpc(url, 'eth_getBalance', [addressFor(i), 'latest'])).status, 200);
  };
  await calls(0);
  const on = structuredClone(g.gateway.context.config) as Config;
  on.tracing = { ...on.tracing, otlp_endpoint: receiver.url, sample_ratio: 1 };
  await g.gateway.reload(on);
  await calls(100);
  // Turned off, each thread's tracer sends what it holds: the 12 calls made while on, and only those.
  const off = structuredClone(on);
  off.tracing = { ...off.tracing, otlp_endpoint: undefined };
  await g.gateway.reload(off);
  const traced = (): OtlpSpan[] => receiver.spans().filter((s) => s.name === 'eth_getBalance');
  await waitFor(() => traced().length >= 12, { ms: 10_000, what: 'the spans of the calls made while on' });
  await calls(200);
  await g.gateway.stop();
  t.equal(traced().length, 12, 'a span for each call made while tracing was on, none before or after');
});

t.test('tracing off: no tracer and no connection to anything', async (t) => {
  const node = await anvilFor(t);
  const receiver = await otlpReceiver(t);
  // The SDK's own variables name the receiver: a tracer made from them anyway would reach it.
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url.replace('/v1/traces', '');
  t.teardown(() => {
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  });
  const g = await gatewayFor(t, { server: { workers: 1 }, chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url }] } } });
  t.equal(tracing, null, 'no tracer made');
  const url = `${g.base}/v1/rpc/${keyFor(g)}`;
  for (let i = 0; i < 10; i++) t.equal((await rpc(url, 'eth_getBalance', [addressFor(i), 'latest'])).status, 200);
  await g.gateway.stop();
  t.equal(receiver.connections(), 0, 'the receiver was never reached');
});
