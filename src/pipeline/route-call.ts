/**
 * The chain's choice of upstream for one forwarded call, and failover.
 *
 * A call goes to an upstream in rotation (selection.ts) that its NodeChoice allows (chain/node-routes.ts: one
 * that serves its method, an archive node first for a state read about an old block) and that has reached the
 * block it is about (node-routes.ts headFor: the served head for `latest`; the highest nodes when none has); with
 * none, it fails at once ('no healthy upstream', which the caller answers 502). Each attempt is counted in the upstream's health: in flight while it runs,
 * then 'ok' for any JSON-RPC answer (an error object included) or 'failed' for a connection error, timeout,
 * non-2xx status or an answer that is not JSON-RPC. An attempt the gateway drops (the client left, or another
 * attempt answered first) is not counted either way.
 *
 * A call whose catalogue row is repeatable (MethodRow.repeatable) gets at most one more attempt, on another upstream in rotation, while
 * nothing of its answer has reached the client and its deadline (timeout_s after it started) has not passed:
 * - when the attempt fails with a connection error, timeout, reset, garbled HTTP, a 5xx or 429, or an answer
 *   that is not JSON-RPC;
 * - when a whole answer is a node error meaning "not there yet" (NOT_THERE_YET: a node a few blocks behind
 *   asked about a block it has not seen), or `"result":null` for a method whose null means "not found"
 *   (MethodRow.nullIfMissing: a block, a transaction, a receipt; eRPC's "retry empty"): on a node further ahead
 *   than the first (its known head higher than the first's when the call went out); for a call about a block
 *   there is no retry when none is, for one by hash (or while no head is known) any other node is asked then;
 *   should the retry fail, or say null too, the client gets that answer;
 * - when a whole answer fails the gateway's checks (chain/answer-checks.ts: a node failure, and the client gets
 *   upstream_answer_invalid should no other node answer), or is suspect (held as a "not there yet" answer is);
 * - when the attempt has not begun answering after half the deadline (a hanging node), or sooner, as soon as its
 *   node is out for failing, or suspected (a head probe of it a second late, see health.ts) while another node
 *   in rotation is not: the second attempt races the first, which keeps its own timeout, and whichever begins
 *   answering first is the answer. The first attempt's node is looked at every HEDGE_CHECK_MS at most, by the
 *   one timer that fires the hedge. When every node is suspected they are slow alike, and sending each slow
 *   call twice would only load them more.
 * So a client never waits longer than timeout_s for an answer to start, as with a single node, and a call
 * caught on a node that hangs waits about as long as the prober takes to suspect it.
 *
 * eth_sendRawTransaction goes to every upstream in rotation that serves it at once (broadcast.ts). eth_blockNumber is
 * answered from the served head when it is fresh (ChainRuntime.freshHead); a forwarded one reports the node's
 * head, and is answered with the served head it then works out (so never below a head already served).
 */
import { type AnswerCheck, FAILED_CHECK_REASON } from '../chain/answer-checks.js';
import { Attempts, isRpcError, mentionsError, NO_RETRY, NodeAttempt, RETRY_WITHIN_DEADLINE } from '../chain/attempts.js';
import type { ChainRuntime } from '../chain/runtime.js';
import type { MethodRow } from '../jsonrpc/method-rule.js';
import type { NodeChoice, ShortOfHead } from '../upstreams/selection.js';
import type { Span } from '@opentelemetry/api';
import { attemptEnded, tracing } from './tracing.js';
import { broadcastTransaction } from './broadcast.js';
import {
  type AnswerSink,
  answerSoon,
  type ForwardCall,
  type ForwardFailure,
  forwardCall,
  noHealthyUpstream,
  type RoutedSink,
} from './forward.js';

/** What routing needs of a chain (a ChainRuntime; narrower so tests can route over stand-in upstreams). */
export type RoutedChain = Pick<ChainRuntime, 'upstreams' | 'health' | 'timeoutMs' | 'freshHead' | 'noteWrite'> &
  Partial<Pick<ChainRuntime, 'served' | 'checks'>>;

/** A whole answer that failed the gateway's checks (chain/answer-checks.ts): a node failure, retried elsewhere. */
const FAILED_CHECK: ForwardFailure = { kind: 'invalid' };

/** Node errors that mean the node has not seen the block asked about yet (geth, reth, erigon, nethermind, besu, anvil). */
const NOT_THERE_YET =
  /header not found|unknown block|block not found|could not be found|BlockOutOfRange|block height is \d+ but requested/i;

/** The share of the deadline after which a silent attempt gets a second one beside it. */
const HEDGE_AFTER = 0.5;
/** Until then a silent attempt's node is looked at about this often, in ms, for being suspected or failing. */
const HEDGE_CHECK_MS = 250;

/**
 * Sends one forwarded call of method `row` to the chain's upstreams that `nodes` allows (see above; null, the
 * default: any node in rotation) and whose head has reached `minHead` (node-routes.ts headFor; null, the default:
 * any head). Sink callbacks never run before this returns.
 */
export function routeCall(
  chain: RoutedChain,
  row: MethodRow,
  paramsJson: string,
  idText: string,
  sink: RoutedSink,
  nodes: NodeChoice | null = null,
  minHead: number | null = null,
): ForwardCall {
  const method = row.name;
  if (method === 'eth_sendRawTransaction') return broadcastTransaction(chain, paramsJson, idText, sink, nodes);
  if (method === 'eth_blockNumber') {
    const head = chain.freshHead();
    if (head !== null)
      return answerSoon(sink, (s) => s.whole(Buffer.from(`{"jsonrpc":"2.0","id":${idText},"result":"0x${head.toString(16)}"}`)));
  }
  return failover(chain, row, paramsJson, idText, sink, nodes, minHead);
}

/** Failures worth another node: the node did not answer, or said it cannot now. */
function isRetriable(failure: ForwardFailure | undefined): boolean {
  if (failure === undefined) return false;
  if (failure.kind === 'status') return failure.status >= 500 || failure.status === 429;
  return true;
}

/** Whether a whole answer is a node error meaning "not there yet"; only answers holding an error are parsed. */
export function isNotThereYet(body: Buffer): boolean {
  if (!mentionsError(body)) return false;
  try {
    const answer = JSON.parse(body.toString()) as { error?: { message?: unknown } };
    const message = answer.error?.message;
    return typeof message === 'string' && NOT_THERE_YET.test(message);
  } catch {
    return false;
  }
}

const NULL_RESULT = Buffer.from('"result":null');

/**
 * Whether a whole answer's result is `null`. Such an answer is short: only one under 512 bytes (an id of up to
 * about 450 characters) is looked at, by a loop (see mentionsError).
 */
export function isNullResult(body: Buffer): boolean {
  const n = body.length;
  if (n > 512) return false;
  for (let i = 0; i < n; i++) if (body[i] === NULL_RESULT[0] && matchesAt(body, i, n, NULL_RESULT)) return true;
  return false;
}

function matchesAt(body: Buffer, i: number, n: number, text: Buffer): boolean {
  if (i + text.length > n) return false;
  for (let k = 1; k < text.length; k++) if (body[i + k] !== text[k]) return false;
  return true;
}

/** The head in a forwarded eth_blockNumber answer, or null. */
function headOf(body: Buffer): number | null {
  try {
    const result = (JSON.parse(body.toString()) as { result?: unknown }).result;
    if (typeof result !== 'string' || !/^0x[0-9a-f]{1,13}$/i.test(result)) return null;
    return parseInt(result, 16);
  } catch {
    return null;
  }
}

/** One attempt of a call on one upstream; it is its forwarded call's sink, so an attempt is one object. */
class Attempt extends NodeAttempt implements AnswerSink {
  call: ForwardCall | null = null;
  /** Its node's known head as the attempt went out: a retry for a block it has not goes to a node beyond it. */
  readonly headAtStart: number | null;
  /** Its span while traced (tracing.ts), until it ends; null while tracing is off or the call is not sampled. */
  span: Span | null = null;

  constructor(
    private readonly f: Failover,
    index: number,
    at: number,
  ) {
    super(f.health, index, at);
    this.headAtStart = f.health.upstreams[index]!.head;
  }

  whole(answer: Buffer): void {
    const f = this.f;
    const verdict = f.check === null ? 'pass' : f.check.judge(answer, this.index);
    if (verdict === 'fail') return this.fail(false, FAILED_CHECK_REASON, FAILED_CHECK);
    const outcome = isRpcError(answer) ? 'rpc_error' : 'ok';
    this.settle('ok', outcome);
    if (this.span !== null) this.traced(outcome);
    let body = answer;
    if (f.row.name === 'eth_blockNumber') {
      const head = headOf(body);
      if (head !== null) {
        f.health.upstreams[this.index]!.reportHead(head);
        body = f.servedInstead(head) ?? body;
      }
    }
    if (f.done) return;
    // A suspect answer (answer-checks.ts) is checked on any other node; "not there yet" and an empty answer on
    // one further ahead.
    const suspect = verdict === 'suspect';
    if (
      f.mayRetry &&
      (suspect || isNotThereYet(body) || (f.retryEmpty && isNullResult(body))) &&
      (f.othersOpen(this) || (suspect ? f.retry() : f.retryAhead(this)))
    ) {
      f.fallback ??= body;
      return;
    }
    f.winner = this;
    f.finish();
    f.sink.whole(body);
  }

  begin(length: number | undefined): void {
    const f = this.f;
    this.settle('ok');
    if (this.span !== null) this.traced('ok');
    if (f.done) {
      this.call?.abort();
      return;
    }
    f.winner = this;
    f.finish();
    f.sink.begin(length);
  }

  chunk(buf: Buffer): boolean {
    return this.f.winner === this ? this.f.sink.chunk(buf) : true;
  }

  end(): void {
    if (this.f.winner === this) this.f.sink.end();
  }

  fail(started: boolean, reason: string, failure?: ForwardFailure): void {
    const f = this.f;
    this.settleFailed(failure);
    if (this.span !== null) this.traced(failure?.kind ?? 'failed', failure?.kind === 'status' ? failure.status : undefined);
    const label = f.health.upstreams[this.index]!.label;
    if (f.winner === this) {
      f.sink.failedUpstream = label;
      f.sink.fail(started, reason, failure);
      return;
    }
    if (f.done || f.othersOpen(this)) return;
    if (isRetriable(failure) && f.retry()) return;
    f.finish();
    if (f.fallback !== null) {
      f.sink.whole(f.fallback);
    } else {
      f.sink.failedUpstream = label;
      f.sink.fail(false, reason, failure);
    }
  }

  /** Ends its span with `outcome` (the first end counts: a dropped attempt may have settled already). */
  traced(outcome: string, status?: number): void {
    const span = this.span;
    this.span = null;
    if (span !== null) attemptEnded(span, outcome, status);
  }
}

/**
 * A call's attempts (see the top of this file), on the chain's one road to its nodes (chain/attempts.ts) under
 * RETRY_WITHIN_DEADLINE, or NO_RETRY for a method that is not repeatable. At most two attempts are ever made, so
 * they are two fields, and the first one needs no list, set or timer beyond the hedge on a chain of several nodes.
 */
class Failover extends Attempts<Attempt> implements ForwardCall {
  winner: Attempt | null = null;
  done = false;
  /** A "not there yet" or suspect answer held while another attempt may do better. */
  fallback: Buffer | null = null;
  /** The checks of the call's whole answers, for a checked method on a chain that checks (else null). */
  readonly check: AnswerCheck | null;
  hedge: ReturnType<typeof setTimeout> | null = null;
  /** Looks at the first attempt's node left before the hedge fires at HEDGE_AFTER of the deadline anyway. */
  hedgeChecksLeft = 0;
  /** A null result is retried (MethodRow.nullIfMissing), on a chain with another node to ask. */
  readonly retryEmpty: boolean;
  /** The call's span while it is traced and sampled (tracing.ts: begun as the call was forwarded), else null. */
  readonly span: Span | null = tracing === null ? null : tracing.current;

  constructor(
    private readonly chain: RoutedChain,
    readonly row: MethodRow,
    private readonly paramsJson: string,
    private readonly idText: string,
    readonly sink: RoutedSink,
    nodes: NodeChoice | null,
    minHead: number | null,
  ) {
    super(chain.health, chain.timeoutMs, row.repeatable ? RETRY_WITHIN_DEADLINE : NO_RETRY, nodes, minHead);
    this.retryEmpty = row.nullIfMissing && chain.upstreams.length > 1;
    this.check = chain.checks?.forCall(row, paramsJson) ?? null;
  }

  /** eth_blockNumber answers the served head (chain/served-head.ts), which the node's answer has just been
   *  counted toward: the answer with it when it is known and not `head`, else null (the node's answer stands). */
  servedInstead(head: number): Buffer | null {
    const served = this.chain.served?.now() ?? null;
    if (served === null || served === head) return null;
    return Buffer.from(`{"jsonrpc":"2.0","id":${this.idText},"result":"0x${served.toString(16)}"}`);
  }

  othersOpen(a: Attempt): boolean {
    const other = a === this.first ? this.second : this.first;
    return other?.open === true;
  }

  private drop(a: Attempt | null): void {
    if (a === null || a === this.winner) return;
    a.drop();
    if (a.span !== null) a.traced('dropped');
    a.call?.abort();
  }

  finish(): void {
    this.done = true;
    if (this.hedge !== null) clearTimeout(this.hedge);
    this.hedge = null;
    this.drop(this.first);
    this.drop(this.second);
  }

  /**
   * After `a` said it has not the block (or the thing) asked about: another attempt on a node further ahead than
   * `a`'s; for a call about a block, else on another node that has reached it (one at the same head may well have
   * it: `a` may be a balancer over nodes a block apart), none when no other node has; for one that names no block
   * (a hash) or while no head is known, else on any other node.
   */
  retryAhead(a: Attempt): boolean {
    const head = a.headAtStart;
    const ahead = head === null ? null : head + 1;
    if (this.minHead === null) return this.retry(ahead, 'highest');
    return (ahead !== null && ahead > this.minHead && this.retry(ahead, 'none')) || this.retry(this.minHead, 'none');
  }

  retry(minHead: number | null = this.minHead, short: ShortOfHead = 'highest'): boolean {
    if (this.first === null || this.done) return false;
    const next = this.nextNode(minHead, short);
    if (next === null) return false;
    if (this.hedge !== null) clearTimeout(this.hedge);
    this.hedge = null;
    this.launch(next);
    return true;
  }

  launch(index: number): Attempt {
    // The first attempt starts as the call does: one clock reading serves the deadline, the attempt and its timeout.
    const at = this.first === null ? this.startedAt : this.health.now();
    // Held before the call starts: a sink call never comes before forwardCall returns, but retry() reads it.
    const a = this.hold(new Attempt(this, index, at));
    if (this.span !== null) a.span = tracing!.attempt(this.span, this.health.upstreams[index]!.label, a === this.first, this.first!.open);
    a.call = forwardCall(this.chain.upstreams[index]!, this.attemptTimeoutMs(at), this.row, this.paramsJson, this.idText, a);
    return a;
  }

  /** One timer, refreshed rather than made anew, so a call costs no more than a plain hedge at half. Looks are
   *  counted, not timed, so the last one is the hedge at half whatever the timers' drift. */
  startHedge(): void {
    const hedgeAfterMs = this.chain.timeoutMs * HEDGE_AFTER;
    this.hedgeChecksLeft = Math.ceil(hedgeAfterMs / HEDGE_CHECK_MS);
    this.hedge = setTimeout(() => this.checkHedge(), hedgeAfterMs / this.hedgeChecksLeft);
    this.hedge.unref?.();
  }

  private checkHedge(): void {
    const hedge = this.hedge;
    if (hedge === null || this.done || this.winner !== null || this.second !== null) return;
    const index = this.first!.index;
    const u = this.health.upstreams[index]!;
    if (--this.hedgeChecksLeft > 0 && !u.failing && !(u.suspected && this.unsuspectedBesides(index))) {
      hedge.refresh();
      return;
    }
    this.hedge = null;
    this.retry();
  }

  /** Whether a node in rotation other than `index` is not suspected. */
  private unsuspectedBesides(index: number): boolean {
    const upstreams = this.health.upstreams;
    return this.health.healthyIndices().some((i) => i !== index && !upstreams[i]!.suspected);
  }

  abort(): void {
    if (this.done) {
      this.winner?.call?.abort();
      return;
    }
    this.finish();
    this.winner = null;
  }

  resume(): void {
    this.winner?.call?.resume();
  }
}

function failover(
  chain: RoutedChain,
  row: MethodRow,
  paramsJson: string,
  idText: string,
  sink: RoutedSink,
  nodes: NodeChoice | null,
  minHead: number | null,
): ForwardCall {
  const f = new Failover(chain, row, paramsJson, idText, sink, nodes, minHead);
  const first = f.nextNode();
  if (first === null) return noHealthyUpstream(sink, f.health.shortOfBudget);
  f.launch(first);
  if (f.mayRetry && !f.done && f.health.upstreams.length > 1) f.startHedge();
  return f;
}
