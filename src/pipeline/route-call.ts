/**
 * The chain's choice of upstream for one forwarded call, and failover under its method's policy (config
 * chains.<slug>.failover, chain/failover-policies.ts; docs/failover.md says each key, docs/upstreams.md the road).
 *
 * A call goes to an upstream in rotation (selection.ts) that its NodeChoice allows (chain/node-routes.ts) and that
 * has reached the block it is about (node-routes.ts headFor; the highest nodes when none has); with none, it
 * fails at once (502). Each attempt counts in its node's health: 'ok' for any JSON-RPC answer (an error object
 * included), 'failed' for a connection error, timeout, 5xx or an answer that is not JSON-RPC (a 429 cools the node
 * down instead, attempts.ts); an attempt the gateway drops (the client left, another answered first) neither way.
 *
 * A repeatable call (MethodRow.repeatable) gets up to `retries` more attempts, each on a node not tried yet,
 * while nothing has reached the client and its deadline leaves time, after `backoff_ms` plus jitter: after a
 * failure `retry_on` names; after a whole answer meaning "not there yet" or an empty one (answer-looks.ts; on a
 * node further ahead, else one that has reached the block: retryAhead), the client getting that answer should
 * the retry fail; after an answer that fails the gateway's checks (chain/answer-checks.ts) or is suspect. And up
 * to `hedge.max` hedges: when the latest attempt has not begun answering after `hedge.after`, or sooner once its
 * node is failing or suspected while another is not (looked at every HEDGE_CHECK_MS by the call's one timer), an
 * attempt on another node races it; the first to begin answering wins, the others are cancelled.
 *
 * eth_sendRawTransaction goes to every node at once (broadcast.ts); eth_blockNumber answers the served head.
 */
import { type AnswerCheck, FAILED_CHECK_REASON } from '../chain/answer-checks.js';
import { Attempts, isRpcError, NO_RETRY, NodeAttempt, RETRY_WITHIN_DEADLINE } from '../chain/attempts.js';
import { failoverOf, hedgeAfterMs, type MethodFailover } from '../chain/failover-policies.js';
import type { ChainRuntime } from '../chain/runtime.js';
import type { FailoverPolicy } from '../config/failover.js';
import type { MethodRow } from '../jsonrpc/method-rule.js';
import type { NodeChoice, ShortOfHead } from '../upstreams/selection.js';
import { type AttemptTrace, attemptEnded, type CallTrace, noteAttempt, tracing } from './tracing.js';
import { headAnswer, headOf, isNotThereYet, isNullResult } from './answer-looks.js';
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
  Partial<Pick<ChainRuntime, 'served' | 'checks' | 'failover'>>;

/** A whole answer that failed the gateway's checks (chain/answer-checks.ts): a node failure, retried elsewhere. */
const FAILED_CHECK: ForwardFailure = { kind: 'invalid' };

/** Until a hedge is due a silent attempt's node is looked at about this often, in ms, for being suspected or failing. */
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
    if (head !== null) return answerSoon(sink, (s) => s.whole(headAnswer(idText, head)));
  }
  return failover(chain, row, paramsJson, idText, sink, nodes, minHead);
}

/** Failures worth another node under `p`: the node did not answer (retry_on transport), or said it cannot now (5xx, 429). */
function isRetriable(p: FailoverPolicy, failure: ForwardFailure | undefined): boolean {
  if (failure === undefined) return false;
  if (failure.kind === 'status') return failure.status === 429 ? p.retry429 : failure.status >= 500 && p.retry5xx;
  return p.retryTransport;
}

/** One attempt of a call on one upstream; it is its forwarded call's sink, so an attempt is one object. */
class Attempt extends NodeAttempt implements AnswerSink {
  call: ForwardCall | null = null;
  /** Its node's known head as the attempt went out: a retry for a block it has not goes to a node beyond it. */
  readonly headAtStart: number | null;
  /** Its trace while traced (tracing.ts), until it ends; null while tracing is off or the call is not sampled. */
  span: AttemptTrace | null = null;

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
    // one further ahead (retry_on empty).
    const suspect = verdict === 'suspect';
    if (
      f.mayRetry &&
      (suspect || (f.policy.retryEmpty && isNotThereYet(body)) || (f.retryEmpty && isNullResult(body))) &&
      (f.othersOpen(this) || (suspect ? f.retry() : f.retryAhead(this)))
    ) {
      f.fallback ??= body;
      return;
    }
    f.win(this);
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
    f.win(this);
    this.streamBegan();
    f.sink.begin(length);
  }

  chunk(buf: Buffer): boolean {
    return this.f.winner === this ? this.f.sink.chunk(buf) : true;
  }

  end(): void {
    this.streamEnded();
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
    if (isRetriable(f.policy, failure) && f.retryAfterFailure(label, reason, failure)) return;
    f.giveUp(label, reason, failure);
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
 * RETRY_WITHIN_DEADLINE, or NO_RETRY for a method that is not repeatable, and its method's failover policy
 * (chain/failover-policies.ts): its timeout, `retries` attempts after failures, `hedge.max` beside a silent one,
 * so 1 + the larger of the two in all (two by default, which the first two fields of Attempts hold).
 */
class Failover extends Attempts<Attempt> implements ForwardCall {
  winner: Attempt | null = null;
  done = false;
  /** A "not there yet" or suspect answer held while another attempt may do better. */
  fallback: Buffer | null = null;
  /** The checks of the call's whole answers, for a checked method on a chain that checks (else null). */
  readonly check: AnswerCheck | null;
  /** The one timer of the call: the hedge's looks at the latest attempt's node, or the backoff before a retry. */
  hedge: ReturnType<typeof setTimeout> | null = null;
  /** Looks at the latest attempt's node left before the hedge fires anyway. */
  hedgeChecksLeft = 0;
  /** A null result is retried (MethodRow.nullIfMissing and retry_on empty), on a chain with another node to ask. */
  readonly retryEmpty: boolean;
  /** The call's trace while it is traced and sampled (tracing.ts: begun as the call was forwarded), else null. */
  readonly span: CallTrace | null = tracing === null ? null : tracing.current;
  readonly policy: FailoverPolicy;
  retriesLeft: number;
  hedgesLeft: number;
  /** The failure a backoff waits after, told the client should no retry follow it. */
  private waited: { label: string; reason: string; failure: ForwardFailure | undefined } | null = null;

  constructor(
    private readonly chain: RoutedChain,
    readonly row: MethodRow,
    private readonly paramsJson: string,
    private readonly idText: string,
    readonly sink: RoutedSink,
    nodes: NodeChoice | null,
    minHead: number | null,
    readonly method: MethodFailover,
  ) {
    const p = method.policy;
    super(chain.health, p.timeoutMs, row.repeatable ? RETRY_WITHIN_DEADLINE : NO_RETRY, nodes, minHead, Math.max(p.retries, p.hedgeMax));
    this.policy = p;
    this.retriesLeft = p.retries;
    this.hedgesLeft = p.hedgeMax;
    this.retryEmpty = row.nullIfMissing && p.retryEmpty && chain.upstreams.length > 1;
    this.check = chain.checks?.forCall(row, paramsJson) ?? null;
  }

  /** eth_blockNumber answers the served head (chain/served-head.ts), which the node's answer was just counted
   *  toward: the answer with it when known and not `head`, else null. */
  servedInstead(head: number): Buffer | null {
    const served = this.chain.served?.now() ?? null;
    if (served === null || served === head) return null;
    return headAnswer(this.idText, served);
  }

  othersOpen(a: Attempt): boolean {
    if (this.first !== a && this.first?.open === true) return true;
    if (this.second !== a && this.second?.open === true) return true;
    return this.later?.some((o) => o !== a && o.open) === true;
  }

  private drop(a: Attempt | null): void {
    if (a === null || a === this.winner) return;
    a.drop();
    if (a.span !== null) a.traced('dropped');
    a.call?.abort();
  }

  /** `a` answers the call (its latency counted toward its method's quantile hedge). */
  win(a: Attempt): void {
    this.winner = a;
    this.method.latency?.record(this.health.now() - a.startedAt);
    this.finish();
  }

  finish(): void {
    this.done = true;
    this.stopTimer();
    this.drop(this.first);
    this.drop(this.second);
    if (this.later !== null) for (const a of this.later) this.drop(a);
  }

  private stopTimer(): void {
    if (this.hedge !== null) clearTimeout(this.hedge);
    this.hedge = null;
  }

  /** No attempt is left to answer: the held answer, else the failure. */
  giveUp(label: string, reason: string, failure: ForwardFailure | undefined): void {
    this.finish();
    if (this.fallback !== null) {
      this.sink.whole(this.fallback);
    } else {
      this.sink.failedUpstream = label;
      this.sink.fail(false, reason, failure);
    }
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

  /** Another attempt after an answer or failure no good (one of `retries`), at once. */
  retry(minHead: number | null = this.minHead, short: ShortOfHead = 'highest'): boolean {
    if (this.retriesLeft === 0) return false;
    if (!this.another(minHead, short)) return false;
    this.retriesLeft--;
    return true;
  }

  /**
   * After a failure: a retry, at once or after the policy's backoff and jitter when what is left of the deadline
   * still leaves RETRY_WITHIN_DEADLINE's margin after it (the client's deadline is never passed for a backoff).
   */
  retryAfterFailure(label: string, reason: string, failure: ForwardFailure | undefined): boolean {
    const p = this.policy;
    if (p.backoffMs === 0 && p.jitterMs === 0) return this.retry();
    if (this.retriesLeft === 0 || this.first === null || this.done || this.count > this.extraAttempts) return false;
    const waitMs = p.backoffMs + Math.floor(Math.random() * (p.jitterMs + 1));
    if (this.deadline - this.health.now() - waitMs < this.rule.minLeftMs) return false;
    this.stopTimer();
    this.waited = { label, reason, failure };
    // Not unref'd: the call is waiting on it alone (bounded by the deadline).
    this.hedge = setTimeout(() => this.afterBackoff(), waitMs);
    return true;
  }

  private afterBackoff(): void {
    this.hedge = null;
    const waited = this.waited!;
    if (this.done) return;
    if (!this.retry()) this.giveUp(waited.label, waited.reason, waited.failure);
  }

  /** An attempt on a node not tried yet, when there is one and the call may make one more. */
  private another(minHead: number | null, short: ShortOfHead): boolean {
    if (this.first === null || this.done) return false;
    const next = this.nextNode(minHead, short);
    if (next === null) return false;
    this.stopTimer();
    this.launch(next);
    // A hedge beside the new attempt, when hedges are left and one more attempt may be made.
    if (this.hedgesLeft > 0 && this.count <= this.extraAttempts) this.startHedge();
    return true;
  }

  launch(index: number): Attempt {
    // The first attempt starts as the call does: one clock reading serves the deadline, the attempt and its timeout.
    const at = this.first === null ? this.startedAt : this.health.now();
    // Held before the call starts: a sink call never comes before forwardCall returns, but retry() reads it.
    const a = this.hold(new Attempt(this, index, at));
    const up = this.chain.upstreams[index]!;
    if (this.span !== null) a.span = noteAttempt(this.span, this.health.upstreams[index]!.label, a === this.first, this.first!.open);
    a.call = forwardCall(up, this.attemptTimeoutMs(at), this.row, this.paramsJson, this.idText, a, this.method.answerTimeoutMs);
    return a;
  }

  /** One timer, refreshed rather than made anew, so a call costs no more than a plain hedge. Looks are counted,
   *  not timed, so the last one is the hedge whatever the timers' drift. */
  startHedge(): void {
    const afterMs = hedgeAfterMs(this.method);
    if (afterMs === null) return;
    this.hedgeChecksLeft = Math.ceil(afterMs / HEDGE_CHECK_MS);
    this.hedge = setTimeout(() => this.checkHedge(), afterMs / this.hedgeChecksLeft);
    this.hedge.unref?.();
  }

  private checkHedge(): void {
    const hedge = this.hedge;
    if (hedge === null || this.done || this.winner !== null || this.hedgesLeft === 0) return;
    const index = this.latest()!.index;
    const u = this.health.upstreams[index]!;
    if (--this.hedgeChecksLeft > 0 && !u.failing && !(u.suspected && this.unsuspectedBesides(index))) {
      hedge.refresh();
      return;
    }
    this.hedge = null;
    if (this.another(this.minHead, 'highest')) this.hedgesLeft--;
  }

  /** Whether a node in rotation other than `index` is not suspected. */
  private unsuspectedBesides(index: number): boolean {
    return this.health.healthyIndices().some((i) => i !== index && !this.health.upstreams[i]!.suspected);
  }

  abort(): void {
    if (this.done) {
      this.winner?.streamEnded();
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
  const f = new Failover(chain, row, paramsJson, idText, sink, nodes, minHead, failoverOf(chain).forMethod(row.name));
  const first = f.nextNode();
  if (first === null) return noHealthyUpstream(sink, f.health.shortOfBudget);
  f.launch(first);
  if (f.mayRetry && !f.done && f.hedgesLeft > 0 && f.health.upstreams.length > 1) f.startHedge();
  return f;
}
