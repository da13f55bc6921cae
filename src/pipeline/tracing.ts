/**
 * OpenTelemetry traces of calls (config `tracing`, docs/failover.md "Tracing"): a span per answered call and, for a
 * forwarded JSON-RPC call, a child span per upstream attempt. Off by default, and then `tracing` is null: each
 * hook on the road is one test of that module binding, with no SDK object, closure or allocation per call.
 *
 * A call's trace is begun as the call is forwarded (beginCall), so that its attempts, made synchronously within it
 * (route-call.ts reads `current`) or later (a retry, a hedge: the Failover keeps its trace), are its children; it
 * ends as the call is settled (settled, from admission.ts). A call answered without a node (a refusal, a cache
 * hit's peers, a Beacon request, a subscription call) gets its trace as it is settled, from the request's start.
 * Whether a call is sampled is decided once, by this module with one Math.random() before the SDK is touched: a
 * call not sampled (99 of 100 at 1 %) costs that draw and nothing else, no span object, id or map entry (the
 * SDK's ratio sampler would make a trace id and a non-recording span per call first: 2 µs of a 21 µs call in the
 * bench). The decision is kept on the call's admission (`span`: undefined before it, null for not sampled), so
 * the SDK samples every span it is asked for, and an attempt always follows its call. The calls are roots (no
 * trace context comes in), so a draw per call is what a trace-id ratio would give.
 *
 * A sampled call is first noted in plain records (CallTrace, AttemptTrace: its times, as performance.now() reads
 * them, and what its end records), and its spans are made with those times in batches of FLUSH_CALLS calls, or
 * after FLUSH_MS: made one call at a time, 1 call in 100, the SDK's code ran cold between calls (a CPU profile of
 * the bench's load at 1 %: 10 µs to begin a span, 13 times what the same code costs at 100 %). An attempt still
 * open when its call's spans are made gets its span then, and ends it live. Each thread has its own tracer
 * provider exporting to the same endpoint; a reload applies the `tracing` keys (reloadTracing).
 *
 * Attributes name a key by its first KEY_PREFIX_LENGTH characters (what `chaingate endpoint list` and the access
 * log show), never the key, and a node by its label (its name, else scheme://host:port), never its URL.
 */
import { type Attributes, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
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

/** One upstream attempt of a sampled call, noted until its call's spans are made (then `span`, if still open). */
export class AttemptTrace {
  /** When it ended (performance.now()), -1 while open. */
  endedAt = -1;
  outcome = '';
  status: number | undefined = undefined;
  /** Its span, made while it was still open as its call's spans were: it then ends live (attemptEnded). */
  span: Span | null = null;

  constructor(
    readonly node: string,
    readonly kind: AttemptKind,
    readonly startedAt: number,
  ) {}
}

/** A sampled call, noted until its spans are made: its start, attempts and, once settled, its end. */
export interface CallTrace {
  /** The span's name: the method it was forwarded as (kept should its end know no better, as when abandoned). */
  name: string;
  startedAt: number;
  attempts: AttemptTrace[];
  end: CallEnd | null;
  endedAt: number;
}

/**
 * A call's trace as its admission keeps it: undefined while no trace was decided (beginCall not called), null
 * when the call was not sampled, else its notes.
 */
export type CallSpan = CallTrace | null | undefined;

/** What a call's admission holds for tracing (admission.ts makes every admission with `span: undefined`). */
export interface TracedCall {
  span?: CallSpan;
}

/** Settled calls whose spans are made together, so the SDK's code runs warm (see the top of this file). */
const FLUSH_CALLS = 32;
/** How long a settled call waits at most for its spans to be made, in ms (then the exporter's own batching). */
const FLUSH_MS = 1000;

/** The tracer of this thread, its provider and its sampling ratio. */
export class CallTracing {
  /** The trace of the call being forwarded right now: an attempt made synchronously within it is its child. */
  current: CallTrace | null = null;
  /** Settled calls whose spans are not made yet (at most FLUSH_CALLS). */
  private settledCalls: CallTrace[] = [];
  private flushTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly provider: BasicTracerProvider,
    private readonly tracer: Tracer,
    /** The share of calls traced (config tracing.sample_ratio): a reload sets it on a running tracer. */
    public ratio: number,
    /** What its provider was made for (tracing.otlp_endpoint, tracing.service_name): a reload keeps it for the same. */
    readonly madeFor: { endpoint: string; serviceName: string } = { endpoint: '', serviceName: '' },
  ) {}

  /** Decides whether `call` is sampled and, when it is, begins its trace and makes it `current` until leave(). */
  beginCall(call: TracedCall, method: string, startedAt: number): void {
    if (Math.random() >= this.ratio) {
      call.span = null;
      return;
    }
    const noted: CallTrace = { name: method, startedAt, attempts: [], end: null, endedAt: 0 };
    call.span = noted;
    this.current = noted;
  }

  leave(): void {
    this.current = null;
  }

  /** Whether `call` has a trace begun and not yet ended. */
  begun(call: TracedCall): boolean {
    return call.span != null;
  }

  /**
   * Whether `call` is to have a span at its end: its trace's, or for a call without one (`call` null among them)
   * a draw now. Asked before anything is built for settled().
   */
  records(call: TracedCall | null): boolean {
    const span = call === null ? undefined : call.span;
    return span === undefined ? Math.random() < this.ratio : span !== null;
  }

  /** Ends the trace of `call` that records(): begun by beginCall, else made now from the request's start `startedAt`. */
  settled(call: TracedCall | null, startedAt: number, e: CallEnd): void {
    let noted = call === null ? undefined : call.span;
    if (noted === null) return;
    if (noted === undefined) noted = { name: e.name, startedAt, attempts: [], end: null, endedAt: 0 };
    else call!.span = null;
    noted.end = e;
    noted.endedAt = performance.now();
    this.settledCalls.push(noted);
    if (this.settledCalls.length >= FLUSH_CALLS) this.flush();
    else if (this.flushTimer === null) {
      this.flushTimer = setTimeout(() => this.flush(), FLUSH_MS);
      this.flushTimer.unref();
    }
  }

  /** Makes the spans of the settled calls, with the times noted (see the top of this file). */
  flush(): void {
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const calls = this.settledCalls;
    this.settledCalls = [];
    for (const c of calls) this.callSpans(c);
  }

  private callSpans(c: CallTrace): void {
    const e = c.end!;
    const attributes: Attributes = {
      'chaingate.chain': e.chain,
      'chaingate.transport': e.transport,
      'rpc.method': e.name,
      'chaingate.ru': e.ru,
      'chaingate.outcome': e.outcome,
      'http.response.status_code': e.status,
    };
    if (e.keyPrefix !== undefined) attributes['chaingate.key_prefix'] = e.keyPrefix;
    const span = this.tracer.startSpan(c.name, { kind: SpanKind.SERVER, startTime: c.startedAt, attributes }, ROOT_CONTEXT);
    if (e.outcome !== 'ok') span.setStatus({ code: SpanStatusCode.ERROR, message: e.outcome });
    if (c.attempts.length > 0) {
      const parent = trace.setSpan(ROOT_CONTEXT, span);
      for (const a of c.attempts) {
        const attrs = { 'chaingate.node': a.node, 'chaingate.attempt': a.kind };
        const s = this.tracer.startSpan('upstream attempt', { kind: SpanKind.CLIENT, startTime: a.startedAt, attributes: attrs }, parent);
        if (a.endedAt < 0) a.span = s;
        else endAttemptSpan(s, a.outcome, a.status, a.endedAt);
      }
    }
    span.end(c.endedAt);
  }

  /** Makes the spans still noted, sends what is buffered and stops the exporter (graceful stop). */
  shutdown(): Promise<void> {
    this.flush();
    return this.provider.shutdown();
  }
}

/**
 * Notes one upstream attempt on `node` of the call whose trace is `parent`: the call's `first`, else a hedge while
 * the first is still open, a retry after it ended. Needs no tracer: a retry or hedge may come after a reload turned
 * tracing off (the call's spans are then made by none).
 */
export function noteAttempt(parent: CallTrace, node: string, first: boolean, firstOpen: boolean): AttemptTrace {
  const a = new AttemptTrace(node, first ? 'first' : firstOpen ? 'hedge' : 'retry', performance.now());
  parent.attempts.push(a);
  return a;
}

/** Ends an attempt with how it ended ('ok', 'rpc_error', a failure kind, 'dropped'): its span, if made, else its notes. */
export function attemptEnded(a: AttemptTrace, outcome: string, status?: number): void {
  if (a.span !== null) return endAttemptSpan(a.span, outcome, status, performance.now());
  a.outcome = outcome;
  a.status = status;
  a.endedAt = performance.now();
}

function endAttemptSpan(span: Span, outcome: string, status: number | undefined, endedAt: number): void {
  span.setAttribute('chaingate.outcome', outcome);
  if (status !== undefined) span.setAttribute('http.response.status_code', status);
  if (outcome !== 'ok' && outcome !== 'rpc_error' && outcome !== 'dropped')
    span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
  span.end(endedAt);
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
  const madeFor = { endpoint: config.otlp_endpoint, serviceName: config.service_name };
  tracing = new CallTracing(provider, provider.getTracer('chaingate'), config.sample_ratio, madeFor);
}

/**
 * Applies a reloaded `config` to this thread's tracing: a new ratio is taken by the running tracer; a new endpoint
 * or service name (or tracing turned on or off) replaces it. The tracer replaced sends what it holds in the
 * background (a collector that does not answer never holds the reload); a call in flight ends its span on the new
 * tracer, or with none when tracing was turned off. Never rejects.
 */
export function reloadTracing(config: TracingConfig): void {
  const running = tracing;
  if (running !== null && config.otlp_endpoint === running.madeFor.endpoint && config.service_name === running.madeFor.serviceName) {
    running.ratio = config.sample_ratio;
    return;
  }
  tracing = null;
  startTracing(config);
  if (running !== null) running.shutdown().catch(() => undefined);
}

/** Flushes and stops this thread's tracing (graceful stop); tracing is off afterwards. Never rejects. */
export async function stopTracing(): Promise<void> {
  const t = tracing;
  tracing = null;
  if (t !== null) await t.shutdown().catch(() => undefined);
}
