/**
 * A call asked of several nodes and answered only when enough of them agree (config
 * chains.<slug>.consistency.quorum; docs/consistency.md, "Quorum"). For operators who mix their own nodes with a
 * provider's, or who do not trust one node's word on a balance.
 *
 * A forwarded call whose method matches quorum.methods (decided once per method and chain; a write, which must
 * never reach several nodes, and eth_blockNumber, which the chain answers from its head, never do) goes at once to
 * min(nodes, nodes in rotation that serve it) distinct nodes, drawn as every call's node is (selection.ts pick(),
 * each drawn node excluded from the next draw). Each attempt counts in its node's health (chain/attempts.ts), so
 * the extra calls show in chaingate_upstream_requests_total. Answers are held whole (at most QUORUM_ANSWER_BYTES
 * each) and compared by jsonrpc/answer-key.ts (canonical JSON; the envelope left out; an error by code and message).
 *
 * - As soon as quorum.agree answers are equal, that answer is served; the attempts still open are not waited for,
 *   but not cancelled either: their answers are read when they come and compared with the one served (a late node
 *   that differs is counted as any other), and they count in their nodes' health. A request already sent costs the
 *   node its work whatever the gateway does, and cancelling it would close its keep-alive socket (when alone on it,
 *   see upstreams/http-response.ts abortExchange): a new connection to the slowest node for every call. Only the
 *   client leaving before the answer cancels them.
 * - A node that fails (no JSON-RPC answer) is replaced by another node in rotation not asked yet, while the call's
 *   deadline (timeout_s from its start) leaves time for it.
 * - When every attempt is over without agreement: with two answers or more that differ, on_mismatch `majority`
 *   serves the answer more nodes gave than any other (strictly), else no_quorum; `error` always answers no_quorum.
 *   With answers that never differed but too few of them (the others failed): no_quorum; with no answer at all, the
 *   last node's failure (upstream_error), as a call on one node would.
 * - Fewer nodes in rotation than quorum.agree: no_quorum at once, no node asked. eRPC makes this a setting
 *   (lowParticipantsBehavior, which may accept the most common answer); here it is not, since a quorum that quietly
 *   becomes one node's word is what the operator set it up to prevent.
 *
 * Every node whose answer differs from the one served is logged (warn) and counted
 * (chaingate_consensus_mismatches_total); one that differs quorum.eject_after times in a row leaves rotation as
 * failing until its next good probe (health.ts eject()). Its streak starts again whenever its answer is the one
 * served. A worker thread keeps its own streaks and its own copy of the node's health, which the main thread's next
 * probe report restores (chain/relay.ts).
 *
 * The client is charged once, by its sink, as for any call (whole() is called once); a failure here reaches the
 * client's sink as a failure whose reason says what was missing (quorum-failures.ts), refunded.
 */
import { isRpcError, NodeAttempt, RETRY_WITHIN_DEADLINE } from '../chain/attempts.js';
import type { ChainRuntime } from '../chain/runtime.js';
import type { QuorumConfig } from '../config/consistency.js';
import { answerKey } from '../jsonrpc/answer-key.js';
import { methodMatcher } from '../jsonrpc/method-patterns.js';
import type { MethodRow } from '../jsonrpc/method-rule.js';
import type { Logger } from '../log.js';
import type { ConsensusMetrics, ConsensusOutcome } from '../metrics/registry.js';
import type { ChainHealth, NodeChoice } from '../upstreams/selection.js';
import {
  type AnswerSink,
  answerSoon,
  type ForwardCall,
  type ForwardFailure,
  forwardCall,
  noHealthyUpstream,
  type RoutedSink,
} from './forward.js';
import { DISAGREED, QUORUM_ANSWER_BYTES, QUORUM_LABEL, TOO_FEW_ANSWERS, TOO_FEW_NODES, TOO_LARGE } from './quorum-failures.js';

const INVALID: ForwardFailure = { kind: 'invalid' };

/** What a quorum call needs of its chain (a ChainRuntime; narrower so tests can use stand-in upstreams). */
export type QuorumChain = Pick<ChainRuntime, 'config' | 'upstreams' | 'health' | 'timeoutMs' | 'metrics'>;

/** A method the chain asks of several nodes, with its counters. */
export interface QuorumMethod {
  readonly metrics: ConsensusMetrics;
}

/** A chain's quorum state: which methods it covers (decided once each) and each node's disagreements in a row. */
class ChainQuorum {
  readonly methods = new Map<string, QuorumMethod | null>();
  readonly streaks: Uint32Array;

  constructor(
    readonly settings: QuorumConfig,
    nodes: number,
  ) {
    this.streaks = new Uint32Array(nodes);
  }
}

/** Each chain's state, by its health (one per chain runtime; a reload's new runtime starts afresh). */
const chains = new WeakMap<ChainHealth, ChainQuorum>();

function chainQuorum(chain: QuorumChain): ChainQuorum {
  let q = chains.get(chain.health);
  if (q === undefined) chains.set(chain.health, (q = new ChainQuorum(chain.config.consistency.quorum, chain.upstreams.length)));
  return q;
}

/** The chain's quorum for calls of `row`, or null when they go to one node. Costs a length test on a chain without one. */
export function quorumOf(chain: QuorumChain, row: MethodRow): QuorumMethod | null {
  const patterns = chain.config.consistency.quorum.methods;
  if (patterns.length === 0) return null;
  const methods = chainQuorum(chain).methods;
  let m = methods.get(row.name);
  if (m === undefined) {
    const covered = row.repeatable && row.name !== 'eth_blockNumber' && methodMatcher(patterns)(row.name);
    m = covered ? { metrics: chain.metrics.consensus(row.name) } : null;
    methods.set(row.name, m);
  }
  return m;
}

/** One node's part in a quorum call: its forwarded call's sink, holding its answer whole. */
class Vote extends NodeAttempt implements AnswerSink {
  call: ForwardCall | null = null;
  /** A large answer's pieces while it arrives; null otherwise. */
  private parts: Buffer[] | null = null;
  private bytes = 0;

  constructor(
    private readonly q: QuorumCall,
    index: number,
    at: number,
  ) {
    super(q.chain.health, index, at);
  }

  whole(body: Buffer): void {
    this.settle('ok', isRpcError(body) ? 'rpc_error' : 'ok');
    this.q.answered(this, body);
  }

  begin(length: number | undefined): void {
    this.settle('ok');
    if (length !== undefined && length > QUORUM_ANSWER_BYTES) return this.overLimit();
    this.parts = [];
    // Its body still arrives from the node: a reload waits for it (chain/attempts.ts streamBegan).
    this.streamBegan();
  }

  chunk(buf: Buffer): boolean {
    const parts = this.parts;
    if (parts === null) return true;
    this.bytes += buf.length;
    if (this.bytes > QUORUM_ANSWER_BYTES) this.overLimit();
    else parts.push(buf);
    return true;
  }

  end(): void {
    const parts = this.parts;
    if (parts === null) return;
    this.parts = null;
    this.streamEnded();
    this.q.answered(this, Buffer.concat(parts, this.bytes));
  }

  fail(_started: boolean, reason: string, failure?: ForwardFailure): void {
    this.parts = null;
    this.settleFailed(failure);
    this.q.failed(this, reason, failure);
  }

  private overLimit(): void {
    this.parts = null;
    this.streamEnded();
    this.call?.abort();
    this.q.tooLarge(this);
  }

  /** Stops the node's call, its outcome not counted (another answer settled the call). */
  stop(): void {
    this.drop();
    this.streamEnded();
    this.call?.abort();
  }
}

/** Answers that are equal: the first one's bytes (the one served), and the votes that gave it. */
interface Agreement {
  readonly key: string;
  readonly body: Buffer;
  readonly votes: Vote[];
}

/** One call asked of several nodes (see the top of this file); its state in fields, its steps as methods. */
class QuorumCall implements ForwardCall {
  private readonly votes: Vote[] = [];
  /** Nodes asked so far: excluded from the next draw. */
  private readonly asked = new Set<number>();
  private readonly agreements = new Map<string, Agreement>();
  private pending = 0;
  private done = false;
  /** The key of the answer served once agreed, which answers arriving later are compared with. */
  private served: string | null = null;
  private largeAnswers = 0;
  private lastFailure: { reason: string; failure: ForwardFailure | undefined; label: string } | null = null;
  private readonly deadline: number;

  constructor(
    readonly chain: QuorumChain,
    private readonly q: ChainQuorum,
    private readonly method: QuorumMethod,
    private readonly row: MethodRow,
    private readonly paramsJson: string,
    private readonly idText: string,
    private readonly sink: RoutedSink,
    private readonly choice: NodeChoice | null,
    private readonly log: Logger | undefined,
    /** The head a node must have reached to take the call (chain/node-routes.ts headFor); null: any. */
    private readonly minHead: number | null,
  ) {
    this.deadline = chain.health.now() + chain.timeoutMs;
  }

  /** The nodes of the call: up to quorum.nodes distinct ones in rotation that the choice allows. */
  draw(): number[] {
    const drawn: number[] = [];
    while (drawn.length < this.q.settings.nodes) {
      const index = this.chain.health.pick(this.asked, this.choice, this.minHead);
      if (index === null) break;
      this.asked.add(index);
      drawn.push(index);
    }
    return drawn;
  }

  launch(index: number): void {
    const at = this.chain.health.now();
    const vote = new Vote(this, index, at);
    this.asked.add(index);
    this.votes.push(vote);
    this.pending++;
    vote.call = forwardCall(this.chain.upstreams[index]!, Math.max(1, this.deadline - at), this.row, this.paramsJson, this.idText, vote);
  }

  answered(vote: Vote, body: Buffer): void {
    this.pending--;
    if (this.done) {
      if (this.served !== null) this.late(vote, answerKey(body));
      return;
    }
    const key = answerKey(body);
    // The forwarded call checked it is a JSON-RPC object with the call's id: one without result or error is a failure.
    if (key === null) return this.lost(vote, 'upstream answer holds neither a result nor an error', INVALID);
    let agreement = this.agreements.get(key);
    if (agreement === undefined) this.agreements.set(key, (agreement = { key, body, votes: [] }));
    agreement.votes.push(vote);
    if (agreement.votes.length >= this.q.settings.agree) this.serve(key, agreement, 'agreed');
    else if (this.pending === 0) this.decide();
  }

  failed(vote: Vote, reason: string, failure: ForwardFailure | undefined): void {
    this.pending--;
    if (!this.done) this.lost(vote, reason, failure);
  }

  /** A node gave no answer to compare: another is asked in its place when one is left, else the call may be over. */
  private lost(vote: Vote, reason: string, failure: ForwardFailure | undefined): void {
    this.lastFailure = { reason, failure, label: this.chain.health.upstreams[vote.index]!.label };
    if (!this.replace() && this.pending === 0) this.decide();
  }

  tooLarge(vote: Vote): void {
    this.pending--;
    this.largeAnswers++;
    vote.stop();
    if (!this.done && this.pending === 0) this.decide();
  }

  /** Asks another node in rotation in place of one that failed, while the deadline leaves time; false when none. */
  private replace(): boolean {
    if (this.deadline - this.chain.health.now() < RETRY_WITHIN_DEADLINE.minLeftMs) return false;
    const index = this.chain.health.pick(this.asked, this.choice, this.minHead);
    if (index === null) return false;
    this.launch(index);
    return true;
  }

  /** Every attempt is over and no answer reached quorum.agree (see the top of this file). */
  private decide(): void {
    const agreements = [...this.agreements.values()];
    if (agreements.length === 0) {
      if (this.largeAnswers > 0) return this.refuse(TOO_LARGE, 'too_large');
      const last = this.lastFailure!;
      this.end('failed');
      this.sink.failedUpstream = last.label;
      this.sink.fail(false, last.reason, last.failure);
      return;
    }
    if (agreements.length === 1) {
      if (this.largeAnswers > 0) return this.refuse(TOO_LARGE, 'too_large');
      return this.refuse(TOO_FEW_ANSWERS, 'too_few');
    }
    if (this.q.settings.on_mismatch === 'majority') {
      agreements.sort((a, b) => b.votes.length - a.votes.length);
      const [most, next] = agreements as [Agreement, Agreement];
      if (most.votes.length > next.votes.length) return this.serve(most.key, most, 'majority');
    }
    this.refuse(DISAGREED, 'disagreed');
  }

  /** The call is decided: nothing more reaches its client. */
  private end(outcome: ConsensusOutcome): void {
    this.done = true;
    this.method.metrics.call(outcome);
  }

  private refuse(reason: string, outcome: ConsensusOutcome): void {
    this.end(outcome);
    this.sink.failedUpstream = QUORUM_LABEL;
    this.sink.fail(false, reason);
  }

  /** Serves `served`; every other answer's node disagreed with it. */
  private serve(key: string, served: Agreement, outcome: ConsensusOutcome): void {
    this.end(outcome);
    this.served = key;
    for (const agreement of this.agreements.values()) {
      if (agreement === served) for (const v of agreement.votes) this.q.streaks[v.index] = 0;
      else for (const v of agreement.votes) this.disagreed(v.index);
    }
    this.sink.whole(served.body);
  }

  /** An answer that came after the call was answered: compared with the answer served all the same. */
  private late(vote: Vote, key: string | null): void {
    if (key === null) return;
    if (key === this.served) this.q.streaks[vote.index] = 0;
    else this.disagreed(vote.index);
  }

  /** Node `index` answered other than the answer served: logged, counted, and out of rotation after eject_after in a row. */
  private disagreed(index: number): void {
    const config = this.chain.config;
    const upstream = config.upstreams[index]?.name ?? this.chain.health.upstreams[index]!.label;
    const fields = { chain: config.slug, method: this.row.name, upstream };
    this.log?.warn("a node's answer differs from the answer its chain's other nodes agreed on", fields);
    this.method.metrics.mismatch(upstream);
    const streaks = this.q.streaks;
    if (++streaks[index]! < this.q.settings.eject_after) return;
    streaks[index] = 0;
    const health = this.chain.health.upstreams[index]!;
    if (health.failing) return;
    health.eject();
    this.log?.warn('upstream out of rotation until its next good probe: its answers kept differing from the agreed ones', {
      ...fields,
      in_a_row: this.q.settings.eject_after,
    });
  }

  /** The client left before its answer: every attempt still open or arriving is cancelled, its outcome not counted. */
  abort(): void {
    if (this.done) return;
    this.done = true;
    for (const v of this.votes) if (v.open || v.streaming) v.stop();
  }

  /** Answers are held whole, never streamed to the client: there is nothing to resume. */
  resume(): void {}
}

/**
 * Sends one call of `row`, which quorumOf said is the chain's to agree on, to several of the nodes `choice` allows
 * (see the top of this file). Sink callbacks never run before this returns.
 */
export function quorumCall(
  chain: QuorumChain,
  method: QuorumMethod,
  row: MethodRow,
  paramsJson: string,
  idText: string,
  sink: RoutedSink,
  choice: NodeChoice | null,
  log?: Logger,
  minHead: number | null = null,
): ForwardCall {
  const q = chainQuorum(chain);
  const call = new QuorumCall(chain, q, method, row, paramsJson, idText, sink, choice, log, minHead);
  const nodes = call.draw();
  if (nodes.length === 0) {
    method.metrics.call('failed');
    return noHealthyUpstream(sink);
  }
  if (nodes.length < q.settings.agree) {
    method.metrics.call('too_few');
    sink.failedUpstream = QUORUM_LABEL;
    return answerSoon(sink, (s) => s.fail(false, TOO_FEW_NODES));
  }
  for (const index of nodes) call.launch(index);
  return call;
}
