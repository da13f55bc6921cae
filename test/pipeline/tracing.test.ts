/**
 * The per-call sampling decision (src/pipeline/tracing.ts): made once per call, before the SDK is touched; a
 * call not sampled as it was forwarded never gets a span when it settles; a call answered without a node is
 * sampled as it settles; an abandoned call's span ends once. Spans are read from the SDK's in-memory exporter.
 */
import t from 'tap';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import * as traced from '../../src/pipeline/tracing.js';
import { attemptEnded, type CallEnd, CallTracing, noteAttempt, type TracedCall } from '../../src/pipeline/tracing.js';

function tracingAt(ratio: number): { tracing: CallTracing; spans: InMemorySpanExporter } {
  const spans = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  return { tracing: new CallTracing(provider, provider.getTracer('test'), ratio), spans };
}

const END: CallEnd = { name: 'eth_getBalance', chain: 'c', transport: 'http', keyPrefix: undefined, ru: 15, outcome: 'ok', status: 200 };

/** A forwarded call as the pipeline runs it: begun, then settled when it records. */
function forward(tr: CallTracing): TracedCall {
  const call: TracedCall = { span: undefined };
  tr.beginCall(call, 'eth_getBalance', performance.now());
  tr.leave();
  if (tr.records(call)) tr.settled(call, performance.now(), END);
  return call;
}

t.test('ratio 0 and 1: nothing, then everything, with the attempts under their call', async (t) => {
  const none = tracingAt(0);
  for (let i = 0; i < 200; i++) forward(none.tracing);
  t.equal(none.tracing.records(null), false, 'a refusal is not sampled at 0');
  none.tracing.flush();
  t.equal(none.spans.getFinishedSpans().length, 0);

  const all = tracingAt(1);
  const call: TracedCall = { span: undefined };
  all.tracing.beginCall(call, 'eth_call', performance.now());
  const parent = all.tracing.current;
  t.not(parent, null, 'a sampled call is current while it is forwarded');
  all.tracing.leave();
  t.equal(all.tracing.current, null);
  t.equal(all.tracing.begun(call), true);
  const attempt = noteAttempt(parent!, 'node-a', true, true);
  attemptEnded(attempt, 'ok');
  t.equal(all.tracing.records(call), true);
  all.tracing.settled(call, performance.now(), { ...END, name: 'eth_call' });
  t.equal(all.tracing.begun(call), false, 'ended once');
  t.equal(all.spans.getFinishedSpans().length, 0, 'no span is made before its batch is');
  all.tracing.flush();
  const finished = all.spans.getFinishedSpans();
  t.equal(finished.length, 2);
  const server = finished.find((s) => s.name === 'eth_call')!;
  const client = finished.find((s) => s.name === 'upstream attempt')!;
  t.equal(client.spanContext().traceId, server.spanContext().traceId, 'the attempt is in its call trace');
  t.equal(client.parentSpanContext?.spanId, server.spanContext().spanId, 'and the call span is its parent');
  t.equal(server.attributes['chaingate.ru'], 15);
});

t.test('a forwarded call is drawn once: not sampled at begin means no span at settle', async (t) => {
  const { tracing, spans } = tracingAt(0.25);
  const n = 4000;
  for (let i = 0; i < n; i++) {
    const call = forward(tracing);
    // A call not sampled keeps null, and settle never draws for it again.
    if (call.span === null && tracing.records(call)) t.fail('an unsampled call recorded at settle');
  }
  tracing.flush();
  const sampled = spans.getFinishedSpans().length;
  // Binomial(4000, 0.25): mean 1000, sd 27; the bounds are 7 sd wide, so this fails only on a wrong ratio.
  t.ok(sampled > 810 && sampled < 1190, `${sampled} of ${n} sampled at 0.25`);
  // Each span's attributes are from its own end: a second draw at settle would have added spans beyond the begin's.
  let begunSampled = 0;
  const again = tracingAt(0.25);
  for (let i = 0; i < n; i++) {
    const call: TracedCall = { span: undefined };
    again.tracing.beginCall(call, 'm', performance.now());
    if (call.span !== null) begunSampled++;
    if (again.tracing.records(call)) again.tracing.settled(call, performance.now(), END);
  }
  again.tracing.flush();
  t.equal(again.spans.getFinishedSpans().length, begunSampled, 'spans ended = calls sampled at begin, no more');
});

t.test('a call answered without a node (refusal, cache hit) is sampled as it settles', async (t) => {
  const { tracing, spans } = tracingAt(1);
  t.equal(tracing.records(null), true);
  tracing.settled(null, performance.now() - 5, { ...END, name: 'eth_foo', outcome: 'method_not_found', status: 200 });
  const cacheHit: TracedCall = { span: undefined };
  t.equal(tracing.begun(cacheHit), false, 'never begun');
  t.equal(tracing.records(cacheHit), true);
  tracing.settled(cacheHit, performance.now(), END);
  tracing.flush();
  const [refusal, hit] = spans.getFinishedSpans();
  t.equal(refusal!.name, 'eth_foo');
  t.equal(refusal!.status.code, 2, 'a refusal is an error span');
  t.equal(hit!.name, 'eth_getBalance');
});

/** A span's start or end in ms of performance.now(), as the SDK keeps it (epoch seconds and nanoseconds). */
const perfMs = (hr: [number, number]): number => hr[0] * 1000 + hr[1] / 1e6 - performance.timeOrigin;

t.test('spans are made in batches, with the times noted as the call and its attempts ran', async (t) => {
  const { tracing, spans } = tracingAt(1);
  const startedAt = performance.now() - 50;
  const call: TracedCall = { span: undefined };
  tracing.beginCall(call, 'eth_getBalance', startedAt);
  const first = noteAttempt(tracing.current!, 'node-a', true, true);
  tracing.leave();
  attemptEnded(first, 'timeout');
  const firstEnd = performance.now();
  await new Promise((r) => setTimeout(r, 20));
  tracing.settled(call, startedAt, END);
  const settledAt = performance.now();
  await new Promise((r) => setTimeout(r, 20));
  tracing.flush();
  const [attempt, server] = spans.getFinishedSpans();
  t.equal(server!.name, 'eth_getBalance');
  t.ok(Math.abs(perfMs(server!.startTime) - startedAt) < 1, 'the call span starts at the request start');
  t.ok(Math.abs(perfMs(server!.endTime) - settledAt) < 5, 'and ends as the call settled, not as its spans were made');
  t.ok(perfMs(attempt!.endTime) <= firstEnd + 1, 'the attempt ends when it ended');
  t.equal(attempt!.attributes['chaingate.outcome'], 'timeout');
  t.equal(attempt!.status.code, 2, 'a failed attempt is an error span');

  // FLUSH_CALLS (32) settled calls make their spans at once, without a flush or a timer.
  for (let i = 0; i < 31; i++) forward(tracing);
  t.equal(spans.getFinishedSpans().length, 2, '31 calls wait for their batch');
  forward(tracing);
  t.equal(spans.getFinishedSpans().length, 34, 'the 32nd makes the batch');
});

t.test('a settled call waits at most a second for its spans; an attempt open then ends live', async (t) => {
  const { tracing, spans } = tracingAt(1);
  const call: TracedCall = { span: undefined };
  tracing.beginCall(call, 'eth_getBalance', performance.now());
  const first = noteAttempt(tracing.current!, 'node-a', true, true);
  const hedge = noteAttempt(tracing.current!, 'node-b', false, true);
  tracing.leave();
  attemptEnded(hedge, 'ok');
  tracing.settled(call, performance.now(), END);
  const until = Date.now() + 3000;
  while (spans.getFinishedSpans().length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  const made = spans.getFinishedSpans();
  t.same(made.map((s) => s.name).sort(), ['eth_getBalance', 'upstream attempt'], 'the call and its ended hedge, by the timer');
  t.equal(made.find((s) => s.name === 'upstream attempt')!.attributes['chaingate.attempt'], 'hedge');
  t.not(first.span, null, 'the first attempt, still open, got its span with its call');
  attemptEnded(first, 'dropped');
  const dropped = spans.getFinishedSpans().find((s) => s.attributes['chaingate.node'] === 'node-a')!;
  t.equal(dropped.attributes['chaingate.outcome'], 'dropped');
  t.equal(dropped.parentSpanContext?.spanId, made.find((s) => s.name === 'eth_getBalance')!.spanContext().spanId);
  t.equal(dropped.status.code, 0, 'dropped is not an error');
});

t.test('the graceful stop makes the spans still noted before the exporter stops', async (t) => {
  const { tracing, spans } = tracingAt(1);
  forward(tracing);
  t.equal(spans.getFinishedSpans().length, 0);
  // InMemorySpanExporter forgets its spans as it shuts down: count them as they are exported.
  let exported = 0;
  const exportFn = spans.export.bind(spans);
  spans.export = (batch, done) => {
    exported += batch.length;
    exportFn(batch, done);
  };
  await tracing.shutdown();
  t.equal(exported, 1);
});

t.test('a reload takes a new ratio on the running tracer, and replaces it for a new endpoint or service name', async (t) => {
  const config = { otlp_endpoint: 'http://127.0.0.1:9/v1/traces', sample_ratio: 0.5, service_name: 'chaingate' };
  t.teardown(() => traced.stopTracing());
  traced.reloadTracing({ ...config, otlp_endpoint: undefined });
  t.equal(traced.tracing, null, 'no endpoint: still off');
  traced.reloadTracing(config);
  const first = traced.tracing;
  t.equal(first?.ratio, 0.5, 'turned on by a reload');
  traced.reloadTracing({ ...config, sample_ratio: 0.01 });
  t.equal(traced.tracing, first, 'a new ratio keeps the tracer');
  t.equal(first?.ratio, 0.01, 'and is taken at once');
  traced.reloadTracing({ ...config, service_name: 'gateway-b' });
  t.not(traced.tracing, first, 'a new service name makes a new tracer');
  const second = traced.tracing;
  traced.reloadTracing({ ...config, otlp_endpoint: 'http://127.0.0.1:9/v2/traces' });
  t.not(traced.tracing, second, 'and so does a new endpoint');
  traced.reloadTracing({ ...config, otlp_endpoint: undefined });
  t.equal(traced.tracing, null, 'turned off by a reload');
});
