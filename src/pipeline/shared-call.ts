/**
 * The step where a forwarded call's answer may be reused or shared, before the chain picks an
 * upstream: a final answer held in the response cache is given back at once (at the cache-hit
 * price), and identical reads in flight at the same time ride on one upstream call.
 */
import { blockOfCall, cacheKeyFor, mayCache } from '../jsonrpc/cacheability.js';
import { rawResult } from '../jsonrpc/raw-result.js';
import { reidAcceptedAnswer } from '../jsonrpc/accepted-answer.js';
import type { GatewayContext } from './context.js';
import type { ChainRuntime } from '../chain/runtime.js';
import { finalThrough } from '../chain/finality.js';
import { dedupKeyFor, type FlightEnd, type Joiner, type SharedFlight, type SharedOutcome } from '../chain/dedup.js';
import { chargeAsCacheHit } from './admission.js';
import type { AnswerSink, ForwardCall } from './forward.js';
import type { Forward } from './plan.js';
import { quorumCall, quorumOf } from './quorum-call.js';
import { routeCall } from './route-call.js';

type Sink = AnswerSink & { failedUpstream?: string };

const CLOSE_BRACE = Buffer.from('}');
const NULL_JSON = Buffer.from('null');

const NO_CALL: ForwardCall = { abort() {}, resume() {} };

/**
 * A forwarded call as the pipeline makes it: answered from the chain's cache, shared with identical reads
 * in flight on the chain, or sent on its own.
 */
export function sharedCall(ctx: GatewayContext, chain: ChainRuntime, asked: Forward, sink: Sink): ForwardCall {
  const f = chain.routes.rewrites ? atChainBlocks(chain, asked) : asked;
  const cache = chain.cache;
  const cacheKey = cache.enabled ? cacheKeyFor(f.row, f.params, f.paramsJson) : null;
  if (cacheKey !== null) {
    const hit = cache.get(cacheKey);
    if (hit !== undefined) return answerFromCache(ctx, f, hit, sink);
    // Looked at now so that a head poll, when one is due, is on its way before the answer comes back.
    chain.head.now();
  }
  const observe = observerFor(chain, f, cacheKey);
  const key = dedupKeyFor(chain.config.slug, f.row, f.params, f.paramsJson);
  if (key === null) return routeForward(ctx, chain, f, observe === null ? sink : tapWhole(ctx, sink, observe));
  return joinFlight(ctx, chain, f, sink, key, observe);
}

/**
 * The call with its tags written as the chain's block numbers (chain/node-routes.ts rewrite), on a chain that
 * rewrites them: from here on it is the call at that number, so its cache key and its sharing in flight are
 * those of what is forwarded (a call at `latest` shares with one at the served head's number, and is kept only
 * once that block is final, as any call at a number). Re-serialized only when a tag was rewritten.
 */
function atChainBlocks(chain: ChainRuntime, f: Forward): Forward {
  const params = chain.routes.rewrite(f.row, f.params);
  return params === null ? f : { ...f, params, paramsJson: JSON.stringify(params) };
}

/**
 * Sends a call on its own to the chain's nodes that may take it and have reached its block (chain/node-routes.ts):
 * to several at once when its method is one the chain's nodes must agree on (consistency.quorum, quorum-call.ts),
 * else to one.
 */
function routeForward(ctx: GatewayContext, chain: ChainRuntime, f: Forward, sink: Sink): ForwardCall {
  const routes = chain.routes;
  const nodes = routes.nodesFor(f.method, f.params);
  const minHead = routes.headFor(f.row, f.params);
  const quorum = quorumOf(chain, f.row);
  if (quorum !== null) return quorumCall(chain, quorum, f.row, f.paramsJson, f.idText, sink, nodes, ctx.log, minHead);
  return routeCall(chain, f.row, f.paramsJson, f.idText, sink, nodes, minHead);
}

/**
 * A cached result with the client's id. It is delivered in a later microtask, as any answer is:
 * callers register the returned call before their sink can run.
 */
function answerFromCache(ctx: GatewayContext, f: Forward, result: Buffer, sink: Sink): ForwardCall {
  chargeAsCacheHit(f.admission, ctx.config.cache.hit_ru_factor);
  let aborted = false;
  queueMicrotask(() => {
    if (!aborted) sink.whole(Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":${f.idText},"result":`), result, CLOSE_BRACE]));
  });
  return {
    abort() {
      aborted = true;
    },
    resume() {},
  };
}

/**
 * What the gateway learns from a whole answer: a final result goes into the cache, a block number
 * updates the head, a transaction hash feeds pending-transaction filters that have no upstream
 * subscription and starts the transaction's watch (Forward.watch). Null when the call teaches nothing, so most answers are never parsed.
 */
function observerFor(chain: ChainRuntime, f: Forward, cacheKey: string | null): ((body: Buffer) => void) | null {
  const filters = f.method === 'eth_sendRawTransaction' && chain.filters.takesSentTransactions() ? chain.filters : undefined;
  const watch = f.watch;
  if (cacheKey === null && f.method !== 'eth_blockNumber' && filters === undefined && watch === null) return null;
  const { cache, head: chainHead, finality } = chain;
  const depth = chain.config.finality_depth;
  // As the call starts: an answer from the old chain that arrives after a reset is kept where nothing reads it.
  const scope = chain.cacheScope;
  const decided = cacheKey === null ? undefined : blockOfCall(f.row, f.params);
  if (decided !== undefined) {
    // The call tells its block: the answer is kept as its bytes, never parsed (a wide eth_getLogs).
    if (decided === null) return null;
    return (body) => {
      const final = finalThrough(finality, chainHead.now(), depth);
      if (final === null || decided > final) return;
      const raw = rawResult(body);
      if (raw !== null && !raw.equals(NULL_JSON)) cache.set(scope, cacheKey!, raw);
    };
  }
  return (body) => {
    const answer = JSON.parse(body.toString()) as { result?: unknown; error?: unknown };
    // Parsed JSON holds no undefined: an answer without a `result` member reads undefined here.
    if (answer.error !== undefined || answer.result === undefined) return;
    const result = answer.result;
    if (f.method === 'eth_blockNumber') {
      if (typeof result === 'string' && /^0x[0-9a-fA-F]{1,13}$/.test(result)) chainHead.note(Number(result));
      return;
    }
    if (f.method === 'eth_sendRawTransaction') {
      if (typeof result !== 'string') return;
      filters?.notePendingTransaction(result);
      watch?.(result);
      return;
    }
    const keep = (final: number | null): void => {
      if (mayCache(f.row, f.params, result, final)) cache.set(scope, cacheKey!, JSON.stringify(result));
    };
    const final = finalThrough(finality, chainHead.now(), depth);
    // Nothing known final yet (the first calls after a start): the answer is kept once a node has told a head.
    if (final === null) void chainHead.fresh().then((head) => keep(finalThrough(finality, head, depth)));
    else keep(final);
  };
}

/** The sink with `observe` run on a whole answer before the client gets it; a failing observer never costs the answer. */
function tapWhole(ctx: GatewayContext, sink: Sink, observe: (body: Buffer) => void): Sink {
  const tapped: Sink = {
    whole(body) {
      safely(ctx, observe, body);
      sink.whole(body);
    },
    begin: (length) => sink.begin(length),
    chunk: (buf) => sink.chunk(buf),
    end: () => sink.end(),
    fail(started, reason) {
      if (tapped.failedUpstream !== undefined) sink.failedUpstream = tapped.failedUpstream;
      sink.fail(started, reason);
    },
  };
  return tapped;
}

function safely(ctx: GatewayContext, observe: (body: Buffer) => void, body: Buffer): void {
  try {
    observe(body);
  } catch (err) {
    ctx.log.warn('an answer could not be read for the cache or the head', { error: String(err) });
  }
}

/**
 * Joins the flight of identical calls under `key`, or starts it. The leader's call goes upstream
 * with the leader's id; a whole answer reaches every caller, each with its own id; a streaming one
 * stays the leader's and sends the followers to calls of their own. A caller that goes away only
 * leaves the flight: the call is dropped when nobody is left waiting, never while followers wait.
 */
function joinFlight(
  ctx: GatewayContext,
  chain: ChainRuntime,
  f: Forward,
  sink: Sink,
  key: string,
  observe: ((body: Buffer) => void) | null,
): ForwardCall {
  const caller = new SharingCaller(ctx, chain, f, sink, observe);
  const flight = chain.inFlight.joinWith(key, caller);
  if (flight !== undefined) {
    flight.attached++;
    caller.flight = flight;
  }
  return caller;
}

/**
 * One shared upstream call while followers may still join it. It is the sink of the leader's routed
 * call: a whole answer or a failure before any byte ends the flight for everyone; a stream stays the
 * leader's.
 */
export class Flight implements Sink, SharedFlight {
  call: ForwardCall | null = null;
  /** Callers still waiting for it (the leader included); when the last one goes, the call is dropped. */
  attached = 0;
  ended = false;
  failedUpstream?: string;

  constructor(
    private readonly leader: SharingCaller,
    private readonly flightEnd: FlightEnd<SharedOutcome>,
  ) {}

  /** Ends the flight with this outcome (once). */
  close(outcome: SharedOutcome): void {
    if (this.ended) return;
    this.ended = true;
    this.flightEnd.finish(outcome);
  }

  whole(body: Buffer): void {
    const leader = this.leader;
    if (leader.observe !== null) safely(leader.ctx, leader.observe, body);
    this.close({ kind: 'whole', body });
  }

  begin(length: number | undefined): void {
    this.close(STREAMED);
    if (this.leader.gone) this.call?.abort();
    else this.leader.sink.begin(length);
  }

  chunk(buf: Buffer): boolean {
    return this.leader.gone ? true : this.leader.sink.chunk(buf);
  }

  end(): void {
    if (!this.leader.gone) this.leader.sink.end();
  }

  fail(started: boolean, reason: string): void {
    if (!started) {
      this.close({ kind: 'failed', reason, upstream: this.failedUpstream ?? '' });
    } else if (!this.leader.gone) {
      const sink = this.leader.sink;
      if (this.failedUpstream !== undefined) sink.failedUpstream = this.failedUpstream;
      sink.fail(true, reason);
    }
  }
}

const STREAMED: SharedOutcome = Object.freeze({ kind: 'streamed' });

/**
 * One caller of a shared call, the leader or a follower; what its client holds to abort or resume, and what
 * the chain's in-flight table holds until the outcome.
 */
class SharingCaller implements ForwardCall, Joiner<SharedOutcome, SharedFlight> {
  gone = false;
  /** The flight this caller joined, while it was in flight at the time. */
  flight: SharedFlight | null = null;
  /** The flight this caller leads, if it does. */
  private led: Flight | null = null;
  /** A follower's own call, made when the shared answer streams. */
  private own: ForwardCall = NO_CALL;

  constructor(
    readonly ctx: GatewayContext,
    private readonly chain: ChainRuntime,
    private readonly f: Forward,
    readonly sink: Sink,
    readonly observe: ((body: Buffer) => void) | null,
  ) {}

  lead(end: FlightEnd<SharedOutcome>): Flight {
    const flight = new Flight(this, end);
    this.led = flight;
    const f = this.f;
    flight.call = routeForward(this.ctx, this.chain, f, flight);
    return flight;
  }

  deliver(outcome: SharedOutcome): void {
    if (this.gone) return;
    const { f, sink } = this;
    if (outcome.kind === 'failed') {
      sink.failedUpstream = outcome.upstream;
      sink.fail(false, outcome.reason);
    } else if (outcome.kind === 'whole') {
      const body = this.led !== null ? outcome.body : reidAcceptedAnswer(outcome.body, f.idText);
      if (body !== null) {
        if (this.led === null) this.chain.metrics.sharedCalls.inc();
        sink.whole(body);
      } else this.own = routeForward(this.ctx, this.chain, f, sink);
    } else if (this.led === null) {
      const observe = this.observe;
      this.own = routeForward(this.ctx, this.chain, f, observe === null ? sink : tapWhole(this.ctx, sink, observe));
    }
  }

  abort(): void {
    if (this.gone) return;
    this.gone = true;
    this.own.abort();
    const flight = this.flight;
    if (flight !== null && !flight.ended) {
      if (--flight.attached > 0) return;
      flight.call?.abort();
      flight.close({ kind: 'failed', reason: 'every caller went away', upstream: '' });
    } else if (this.led !== null) {
      // The flight is over: what is left is the leader's own stream.
      this.led.call?.abort();
    }
  }

  resume(): void {
    this.own.resume();
    this.led?.call?.resume();
  }
}
