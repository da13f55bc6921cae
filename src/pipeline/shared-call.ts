/**
 * The step where a forwarded call's answer may be reused or shared, before the chain picks an
 * upstream: a final answer held in the response cache is given back at once (at the cache-hit
 * price), and identical reads in flight at the same time ride on one upstream call.
 */
import { blockOfCall, cacheKeyFor, mayCache } from '../jsonrpc/cacheability.js';
import { rawResult } from '../jsonrpc/raw-result.js';
import { rewriteId } from '../jsonrpc/id-rewrite.js';
import { type GatewayContext, gatewayState } from '../server/context.js';
import type { ChainRuntime } from '../upstreams/chain.js';
import { chargeAsCacheHit } from './admission.js';
import type { Shared } from './dedup.js';
import { dedupKeyFor, RENEW_AFTER_SETS } from './dedup.js';
import type { AnswerSink, ForwardCall } from './forward.js';
import { chainHead } from './head.js';
import type { Forward } from './plan.js';
import { routeCall } from './route-call.js';

type Sink = AnswerSink & { failedUpstream?: string };

/**
 * What the callers sharing one upstream call get: its whole answer (with the leader's id), its
 * failure before any byte was sent, or word that it streams (too big to hold whole), after which
 * each follower makes a call of its own.
 */
export type SharedOutcome =
  | { kind: 'whole'; body: Buffer }
  | { kind: 'failed'; reason: string; upstream: string }
  | { kind: 'streamed' };

/** One shared upstream call while followers may still join it. */
interface Flight {
  call: ForwardCall | null;
  /** Callers still waiting for it (the leader included); when the last one goes, the call is dropped. */
  attached: number;
  /** Ends the flight with this outcome (once). */
  finish(outcome: SharedOutcome): void;
}

/** A flight as its table holds it: emptied when the flight ends, so a discarded hash table holding the
 *  slot (see RENEW_AFTER_SETS in dedup.ts) keeps none of the call's objects alive. */
interface FlightSlot {
  flight: Flight | null;
}

/** The flights by key, in a Map renewed every RENEW_AFTER_SETS insertions (see dedup.ts). */
interface FlightTable {
  map: Map<string, FlightSlot>;
  sets: number;
}

const flightTables = new WeakMap<Shared<SharedOutcome>, FlightTable>();

function flightsOf(table: Shared<SharedOutcome>): FlightTable {
  let flights = flightTables.get(table);
  if (flights === undefined) flightTables.set(table, (flights = { map: new Map(), sets: 0 }));
  return flights;
}

const CLOSE_BRACE = Buffer.from('}');
const NULL_JSON = Buffer.from('null');

const NO_CALL: ForwardCall = { abort() {}, resume() {} };

/** A forwarded call as the pipeline makes it: answered from the cache, shared with identical reads in flight, or sent on its own. */
export function sharedCall(ctx: GatewayContext, chain: ChainRuntime, f: Forward, sink: Sink): ForwardCall {
  const state = gatewayState(ctx);
  const cacheKey = state.cache.enabled ? cacheKeyFor(f.method, f.params) : null;
  if (cacheKey !== null) {
    const hit = state.cache.get(chain.config.slug, cacheKey);
    if (hit !== undefined) return answerFromCache(ctx, f, hit, sink);
    // Looked at now so that a head poll, when one is due, is on its way before the answer comes back.
    chainHead(chain).now();
  }
  const observe = observerFor(ctx, chain, f, cacheKey);
  const key = dedupKeyFor(chain.config.slug, f.method, f.params);
  if (key === null) return routeCall(chain, f.method, f.paramsJson, f.idText, observe === null ? sink : tapWhole(ctx, sink, observe));
  return joinFlight(ctx, chain, f, sink, key, observe);
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
 * subscription. Null when the call teaches nothing, so most answers are never parsed.
 */
function observerFor(ctx: GatewayContext, chain: ChainRuntime, f: Forward, cacheKey: string | null): ((body: Buffer) => void) | null {
  const state = gatewayState(ctx);
  const filters = f.method === 'eth_sendRawTransaction' ? state.filters.get(chain) : undefined;
  if (cacheKey === null && f.method !== 'eth_blockNumber' && filters === undefined) return null;
  const depth = chain.config.finality_depth;
  const decided = cacheKey === null ? undefined : blockOfCall(f.method, f.params);
  if (decided !== undefined) {
    // The call tells its block: the answer is kept as its bytes, never parsed (a wide eth_getLogs).
    if (decided === null) return null;
    return (body) => {
      const head = chainHead(chain).now();
      if (head === null || decided > head - depth) return;
      const raw = rawResult(body);
      if (raw !== null && !raw.equals(NULL_JSON)) state.cache.set(chain.config.slug, cacheKey!, raw);
    };
  }
  return (body) => {
    const answer = JSON.parse(body.toString()) as { result?: unknown; error?: unknown };
    if (answer.error !== undefined || !('result' in answer)) return;
    const result = answer.result;
    if (f.method === 'eth_blockNumber') {
      if (typeof result === 'string' && /^0x[0-9a-fA-F]{1,13}$/.test(result)) chainHead(chain).note(Number(result));
      return;
    }
    if (filters !== undefined) {
      if (typeof result === 'string') filters.notePendingTransaction(result);
      return;
    }
    const keep = (head: number | null): void => {
      if (mayCache(f.method, f.params, result, head, depth)) state.cache.set(chain.config.slug, cacheKey!, JSON.stringify(result));
    };
    const head = chainHead(chain).now();
    // No head known yet (the first calls after a start): the answer is kept once a node has told one.
    if (head === null) void chainHead(chain).fresh().then(keep);
    else keep(head);
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
function joinFlight(ctx: GatewayContext, chain: ChainRuntime, f: Forward, sink: Sink, key: string, observe: ((body: Buffer) => void) | null): ForwardCall {
  const table = gatewayState(ctx).inFlight;
  const flights = flightsOf(table);
  let gone = false;
  let led: Flight | null = null;
  /** A follower's own call, made when the shared answer streams. */
  let own: ForwardCall = NO_CALL;

  const lead = (done: (outcome: SharedOutcome) => void): void => {
    let finished = false;
    const flight: Flight = {
      call: null,
      attached: 0,
      finish(outcome) {
        if (finished) return;
        finished = true;
        if (flights.map.get(key) === slot) flights.map.delete(key);
        slot.flight = null;
        done(outcome);
      },
    };
    led = flight;
    const slot: FlightSlot = { flight };
    if (++flights.sets >= RENEW_AFTER_SETS) {
      flights.sets = 0;
      flights.map = new Map(flights.map);
    }
    flights.map.set(key, slot);
    const tap: Sink = {
      whole(body) {
        if (observe !== null) safely(ctx, observe, body);
        flight.finish({ kind: 'whole', body });
      },
      begin(length) {
        flight.finish({ kind: 'streamed' });
        if (gone) flight.call?.abort();
        else sink.begin(length);
      },
      chunk: (buf) => (gone ? true : sink.chunk(buf)),
      end() {
        if (!gone) sink.end();
      },
      fail(started, reason) {
        if (!started) {
          flight.finish({ kind: 'failed', reason, upstream: tap.failedUpstream ?? '' });
        } else if (!gone) {
          if (tap.failedUpstream !== undefined) sink.failedUpstream = tap.failedUpstream;
          sink.fail(true, reason);
        }
      },
    };
    flight.call = routeCall(chain, f.method, f.paramsJson, f.idText, tap);
  };

  const deliver = (outcome: SharedOutcome): void => {
    if (gone) return;
    if (outcome.kind === 'failed') {
      sink.failedUpstream = outcome.upstream;
      sink.fail(false, outcome.reason);
    } else if (outcome.kind === 'whole') {
      const body = led !== null ? outcome.body : rewriteId(outcome.body, f.idText);
      if (body !== null) sink.whole(body);
      else own = routeCall(chain, f.method, f.paramsJson, f.idText, sink);
    } else if (led === null) {
      own = routeCall(chain, f.method, f.paramsJson, f.idText, observe === null ? sink : tapWhole(ctx, sink, observe));
    }
  };

  table.join(key, lead, deliver);
  const flight = flights.map.get(key)?.flight ?? undefined;
  if (flight !== undefined) flight.attached++;
  return {
    abort() {
      if (gone) return;
      gone = true;
      own.abort();
      if (flight !== undefined && flights.map.get(key)?.flight === flight) {
        if (--flight.attached > 0) return;
        flight.call?.abort();
        flight.finish({ kind: 'failed', reason: 'every caller went away', upstream: '' });
      } else if (led !== null) {
        // The flight is over: what is left is the leader's own stream.
        (led as Flight).call?.abort();
      }
    },
    resume() {
      own.resume();
      (led as Flight | null)?.call?.resume();
    },
  };
}
