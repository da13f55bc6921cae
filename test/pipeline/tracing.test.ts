/**
 * The per-call sampling decision (src/pipeline/tracing.ts): made once per call, before the SDK is touched; a
 * call not sampled as it was forwarded never gets a span when it settles; a call answered without a node is
 * sampled as it settles; an abandoned call's span ends once. Spans are read from the SDK's in-memory exporter.
 */
import t from 'tap';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { type CallEnd, CallTracing, type TracedCall } from '../../src/pipeline/tracing.js';

function tracingAt(ratio: number): { tracing: CallTracing; spans: InMemorySpanExporter } {
  const spans = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  return { tracing: new CallTracing(provider, provider.getTracer('test'), ratio), spans };
}

const END: CallEnd = { name: 'eth_getBalance', chain: 'c', transport: 'http', keyPrefix: undefined, ru: 15, outcome: 'ok', status: 200 };

/** A forwarded call as the pipeline runs it: begun, then settled when it records. */
function forward(tr: CallTracing): TracedCall {
  const call: TracedCall = { span: undefined };
  tr.beginCall(call, 'eth_getBalance', Date.now());
  tr.leave();
  if (tr.records(call)) tr.settled(call, Date.now(), END);
  return call;
}

t.test('ratio 0 and 1: nothing, then everything, with the attempts under their call', async (t) => {
  const none = tracingAt(0);
  for (let i = 0; i < 200; i++) forward(none.tracing);
  t.equal(none.tracing.records(null), false, 'a refusal is not sampled at 0');
  t.equal(none.spans.getFinishedSpans().length, 0);

  const all = tracingAt(1);
  const call: TracedCall = { span: undefined };
  all.tracing.beginCall(call, 'eth_call', Date.now());
  const parent = all.tracing.current;
  t.not(parent, null, 'a sampled call is current while it is forwarded');
  all.tracing.leave();
  t.equal(all.tracing.current, null);
  t.equal(all.tracing.begun(call), true);
  const attempt = all.tracing.attempt(parent!, 'node-a', true, true);
  attempt.end();
  t.equal(all.tracing.records(call), true);
  all.tracing.settled(call, Date.now(), { ...END, name: 'eth_call' });
  t.equal(all.tracing.begun(call), false, 'ended once');
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
  const sampled = spans.getFinishedSpans().length;
  // Binomial(4000, 0.25): mean 1000, sd 27; the bounds are 7 sd wide, so this fails only on a wrong ratio.
  t.ok(sampled > 810 && sampled < 1190, `${sampled} of ${n} sampled at 0.25`);
  // Each span's attributes are from its own end: a second draw at settle would have added spans beyond the begin's.
  let begunSampled = 0;
  const again = tracingAt(0.25);
  for (let i = 0; i < n; i++) {
    const call: TracedCall = { span: undefined };
    again.tracing.beginCall(call, 'm', Date.now());
    if (call.span !== null) begunSampled++;
    if (again.tracing.records(call)) again.tracing.settled(call, Date.now(), END);
  }
  t.equal(again.spans.getFinishedSpans().length, begunSampled, 'spans ended = calls sampled at begin, no more');
});

t.test('a call answered without a node (refusal, cache hit) is sampled as it settles', async (t) => {
  const { tracing, spans } = tracingAt(1);
  t.equal(tracing.records(null), true);
  tracing.settled(null, Date.now() - 5, { ...END, name: 'eth_foo', outcome: 'method_not_found', status: 200 });
  const cacheHit: TracedCall = { span: undefined };
  t.equal(tracing.begun(cacheHit), false, 'never begun');
  t.equal(tracing.records(cacheHit), true);
  tracing.settled(cacheHit, Date.now(), END);
  const [refusal, hit] = spans.getFinishedSpans();
  t.equal(refusal!.name, 'eth_foo');
  t.equal(refusal!.status.code, 2, 'a refusal is an error span');
  t.equal(hit!.name, 'eth_getBalance');
});
