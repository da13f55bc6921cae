/**
 * OpenTelemetry traces of calls (config `tracing`, docs/failover.md "Tracing"): a span per answered call and, for a
 * forwarded JSON-RPC call, a child span per upstream attempt. Off by default, and then `tracing` is null: each
 * hook on the road is one test of that module binding, with no SDK object, closure or allocation per call.
 *
 * A call's span is begun as the call is forwarded (beginCall), so that its attempts, made synchronously within it
 * (route-call.ts reads `current`) or later (a retry, a hedge: the Failover keeps its span), are its children; it
 * ends as the call is settled (settled, from admission.ts). A call answered without a node (a refusal, a cache
 * hit's peers, a Beacon request, a subscription call) gets its span as it is settled, from the request's start.
 * Whether a call is sampled is decided once, by this module with one Math.random() before the SDK is touched: a
 * call not sampled (99 of 100 at 1 %) costs that draw and nothing else, no span object, id or map entry (the
 * SDK's ratio sampler would make a trace id and a non-recording span per call first: 2 µs of a 21 µs call in the
 * bench). The decision is kept on the call's admission (`span`: undefined before it, null for not sampled), so
 * the SDK samples every span it is asked for, and an attempt always follows its call. The calls are roots (no
 * trace context comes in), so a draw per call is what a trace-id ratio would give. Each thread has its own
 * tracer provider exporting to the same endpoint.
 *
 * Attributes name a key by its first KEY_PREFIX_LENGTH characters (what `chaingate endpoint list` and the access
 * log show), never the key, and a node by its label (its name, else scheme://host:port), never its URL.
 */
import { ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { TracingConfig } from '../config/tracing.js';

/** How an attempt came to be made: the call's first, a retry after a failure, or a hedge beside a silent one. */
export type AttemptKind = 'first' | 'retry' | 'hedge';

/** What a span's end records of a call. */
export interface CallEnd {
  /** The span's name: the method, or its metrics label ('other' for one outside the allowlist). */
  name: string;
  chain: string;
  transport: string;
  /** The key's prefix, or undefined on the keyless path. */
  keyPrefix: string | undefined;
  ru: number;
  /** 'ok', or an error code of src/errors.ts ('error' when the step that settled gave none). */
  outcome: string;
  status: number;
}

/**
 * A call's span as its admission keeps it: undefined while no span was decided (beginCall not called), null when
 * the call was not sampled, else its recording span.
 */
export type CallSpan = Span | null | undefined;

/** What a call's admission holds for tracing (admission.ts makes every admission with `span: undefined`). */
export interface TracedCall {
  span?: CallSpan;
}

/** The tracer of this thread, its provider and its sampling ratio. */
export class CallTracing {
  /** The span of the call being forwarded right now: an attempt made synchronously within it is its child. */
  current: Span | null = null;

  constructor(
    private readonly provider: BasicTracerProvider,
    private readonly tracer: Tracer,
    private readonly ratio: number,
  ) {}

  /** Decides whether `call` is sampled and, when it is, begins its span and makes it `current` until leave(). */
  beginCall(call: TracedCall, method: string, startedAt: number): void {
    if (Math.random() >= this.ratio) {
      call.span = null;
      return;
    }
    const span = this.tracer.startSpan(method, { kind: SpanKind.SERVER, startTime: startedAt }, ROOT_CONTEXT);
    call.span = span;
    this.current = span;
  }

  leave(): void {
    this.current = null;
  }

  /** Whether `call` has a span begun and not yet ended. */
  begun(call: TracedCall): boolean {
    return call.span != null;
  }

  /**
   * Whether `call` is to have a span at its end: its span's, or for a call without one (`call` null among them)
   * a draw now. Asked before anything is built for settled().
   */
  records(call: TracedCall | null): boolean {
    const span = call === null ? undefined : call.span;
    return span === undefined ? Math.random() < this.ratio : span !== null;
  }

  /** Ends the span of `call` that records(): begun by beginCall, else made now from the request's start `startedAt`. */
  settled(call: TracedCall | null, startedAt: number, e: CallEnd): void {
    let span = call === null ? undefined : call.span;
    if (span === null) return;
    if (span === undefined) span = this.tracer.startSpan(e.name, { kind: SpanKind.SERVER, startTime: startedAt }, ROOT_CONTEXT);
    else call!.span = null;
    span.setAttribute('chaingate.chain', e.chain);
    span.setAttribute('chaingate.transport', e.transport);
    span.setAttribute('rpc.method', e.name);
    if (e.keyPrefix !== undefined) span.setAttribute('chaingate.key_prefix', e.keyPrefix);
    span.setAttribute('chaingate.ru', e.ru);
    span.setAttribute('chaingate.outcome', e.outcome);
    span.setAttribute('http.response.status_code', e.status);
    if (e.outcome !== 'ok') span.setStatus({ code: SpanStatusCode.ERROR, message: e.outcome });
    span.end();
  }

  /**
   * The span of one upstream attempt on `node` of a call whose span is `parent` (a recording one): the call's
   * `first`, else a hedge while the first is still open, a retry after it ended.
   */
  attempt(parent: Span, node: string, first: boolean, firstOpen: boolean): Span {
    const kind: AttemptKind = first ? 'first' : firstOpen ? 'hedge' : 'retry';
    const attributes = { 'chaingate.node': node, 'chaingate.attempt': kind };
    return this.tracer.startSpan('upstream attempt', { kind: SpanKind.CLIENT, attributes }, trace.setSpan(ROOT_CONTEXT, parent));
  }

  /** Sends what is buffered and stops the exporter (graceful stop). */
  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}

/** Ends an attempt's span with how it ended ('ok', 'rpc_error', a failure kind, 'dropped'). */
export function attemptEnded(span: Span, outcome: string, status?: number): void {
  span.setAttribute('chaingate.outcome', outcome);
  if (status !== undefined) span.setAttribute('http.response.status_code', status);
  if (outcome !== 'ok' && outcome !== 'rpc_error' && outcome !== 'dropped')
    span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
  span.end();
}

/** How long one export may take, in ms. */
const EXPORT_TIMEOUT_MS = 3000;

/** This thread's tracing, or null while tracing is off (the default). */
export let tracing: CallTracing | null = null;

/** Starts this thread's tracing when `config` names an endpoint; a second start keeps the first. */
export function startTracing(config: TracingConfig): void {
  if (tracing !== null || config.otlp_endpoint === undefined) return;
  // A collector that does not answer holds a graceful stop this long at most.
  const exporter = new OTLPTraceExporter({ url: config.otlp_endpoint, timeoutMillis: EXPORT_TIMEOUT_MS });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.service_name }),
    // Sampling is decided per call in CallTracing: every span the SDK is asked for is one to record.
    sampler: new AlwaysOnSampler(),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  tracing = new CallTracing(provider, provider.getTracer('chaingate'), config.sample_ratio);
}

/** Flushes and stops this thread's tracing (graceful stop); tracing is off afterwards. Never rejects. */
export async function stopTracing(): Promise<void> {
  const t = tracing;
  tracing = null;
  if (t !== null) await t.shutdown().catch(() => undefined);
}
