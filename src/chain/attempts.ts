/**
 * The one road from a call to a chain's nodes, for every kind of call: which node an attempt goes to, how it
 * counts in that node's health, and whether a failed attempt gets another node. JSON-RPC calls (failover in
 * pipeline/route-call.ts), Beacon requests (pipeline/beacon-call.ts), the gateway's own reads (ChainRuntime.call)
 * and transaction broadcasts all count their attempts here; they differ only in their RetryRule.
 *
 * A call makes at most two attempts by default (more under a failover policy's retries and hedges), each on a node in rotation (selection.ts) that its NodeChoice allows (one
 * that serves its method; an archive node first for a state read about an old block, see node-routes.ts), the
 * later ones never on the node of an earlier one; and, when the call is about a block (node-routes.ts headFor), on a node
 * that has reached it (selection.ts pick's minHead). Each attempt is counted in its node's health: in flight while it runs, then 'ok' (the node
 * answered) or 'failed' (it could not be reached, timed out or answered with a failure). An attempt the
 * gateway drops (the client left, another attempt answered first) is not counted either way.
 *
 * Classes rather than factories: one call's attempts are one object and each attempt another (a JSON-RPC
 * attempt is also its forwarded call's sink, see route-call.ts), with no closure made per call.
 */
import type { UpstreamOutcome } from '../metrics/registry.js';
import type { ChainHealth, NodeChoice, ShortOfHead } from '../upstreams/selection.js';
import { NodeRpcError } from '../upstreams/rpc-call.js';

/** When a call gets a second attempt on another node. What counts as a failure worth it is the caller's. */
export interface RetryRule {
  /** Whether a failed attempt may be followed by one on another node. */
  readonly retry: boolean;
  /**
   * Whether the attempts share one deadline (the chain's timeout from the first attempt's start: the second
   * gets what is left) or each has the chain's whole timeout.
   */
  readonly sharedDeadline: boolean;
  /** Under a shared deadline, a second attempt needs at least this much of it left, in ms. */
  readonly minLeftMs: number;
}

/** Never a second attempt: writes that may not reach two nodes (Beacon POSTs, non-idempotent JSON-RPC). */
export const NO_RETRY: RetryRule = { retry: false, sharedDeadline: true, minLeftMs: 0 };

/** Once more on another node within the first attempt's deadline: forwarded JSON-RPC calls and Beacon GETs. */
export const RETRY_WITHIN_DEADLINE: RetryRule = { retry: true, sharedDeadline: true, minLeftMs: 100 };

/** Once more on another node with a whole timeout of its own: the gateway's own reads (ChainRuntime.call). */
export const RETRY_ONCE: RetryRule = { retry: true, sharedDeadline: false, minLeftMs: 0 };

/**
 * What the metrics call a failed attempt, from what the caller knows of it: an upstream client error kind
 * (`timeout`, or a connection failure, reset or garbled HTTP), an HTTP status the node answered outside 2xx,
 * or `invalid` (an answer that is not JSON-RPC).
 */
export function failureOutcome(kind: string, status?: number): UpstreamOutcome {
  if (kind === 'timeout') return 'timeout';
  if (kind === 'status' || status !== undefined) return 'http_error';
  return 'transport_error';
}

/**
 * Settles an attempt whose callUpstream threw `err`: a node's JSON-RPC error object is its answer ('ok'), anything
 * else a failure of its kind. Returns whether the node answered (the error is then the caller's to pass on).
 */
export function settleCallError(attempt: NodeAttempt, err: unknown): boolean {
  const answered = err instanceof NodeRpcError;
  attempt.settle(answered ? 'ok' : 'failed', answered ? 'rpc_error' : failureOutcome((err as { kind?: string }).kind ?? ''));
  return answered;
}

/** Whether a whole JSON-RPC answer is an error object: its `"error"` key comes before any `"result"`, near the start. */
export function isRpcError(body: Buffer): boolean {
  // A loop over the bytes: Buffer#indexOf of a string costs a string's encoding and a way into C++ per call.
  const n = Math.min(body.length, 256);
  for (let i = 0; i < n; i++) {
    if (body[i] !== QUOTE) continue;
    if (names(body, i, n, ERROR_NAME)) return true;
    if (names(body, i, n, RESULT_NAME)) return false;
  }
  return false;
}

/**
 * Whether `"error"` appears anywhere in a whole answer (a cheap look before parsing one that may hold a node
 * error). A small answer is read by a loop: Buffer#includes of a string encodes it and goes into C++ per call.
 */
export function mentionsError(body: Buffer): boolean {
  const n = body.length;
  if (n > 512) return body.includes(ERROR_NAME);
  for (let i = 0; i < n; i++) if (body[i] === QUOTE && names(body, i, n, ERROR_NAME)) return true;
  return false;
}

const QUOTE = 0x22;
const ERROR_NAME = Buffer.from('"error"');
const RESULT_NAME = Buffer.from('"result"');

/** Whether body[i, n) starts with `name`. */
function names(body: Buffer, i: number, n: number, name: Buffer): boolean {
  if (i + name.length > n) return false;
  for (let k = 1; k < name.length; k++) if (body[i + k] !== name[k]) return false;
  return true;
}

/**
 * The nodes a call sent to several at once goes to (a transaction's broadcast, pipeline/broadcast.ts, and its
 * resend by the watch, tx-watch-steps.ts): those in rotation that `choice` allows (NodeChoice.serves: an upstream
 * whose methods.deny names the method takes none) and that have room in their budget (rps, max_in_flight, a 429's
 * cooldown). null when no node in rotation serves it; empty when none of those has room (health.shortOfBudget).
 */
export function fanOutNodes(health: ChainHealth, choice: NodeChoice | null): number[] | null {
  const serves = choice?.serves ?? null;
  const inRotation = health.healthyIndices();
  const serving = serves === null ? inRotation : inRotation.filter((i) => serves[i]);
  return serving.length === 0 ? null : health.withRoom(serving);
}

/** One attempt on one node, counted in flight from its making until settle() or drop(). */
export class NodeAttempt {
  /** Counted in flight and not yet settled in health. */
  open = true;
  /** Counted in its node's `streaming` (streamBegan). */
  streaming = false;
  readonly startedAt: number;

  /** `at`: the health clock's time now, when the caller has just read it (a call's first attempt). */
  constructor(
    readonly health: ChainHealth,
    readonly index: number,
    at: number = health.now(),
  ) {
    this.startedAt = at;
    health.upstreams[index]!.inflight++;
    health.charge(index, at);
  }

  /**
   * settle('failed') for a failure the caller was told of: its kind (an upstream client error kind, `status`
   * with the HTTP status, `invalid`) is what the metrics say. A 429 is the node's budget, not its health: the
   * node cools down (its Retry-After when it gave one, see upstreams/node-budget.ts) and the attempt is not
   * counted as failed, so a throttling node stays in rotation and is asked again once the cooldown ends. A
   * streamed answer that fails is over (streamEnded).
   */
  settleFailed(failure: { kind: string; status?: number; retryAfterMs?: number | null } | undefined): void {
    this.streamEnded();
    if (failure?.status === 429) {
      if (!this.open) return;
      const health = this.health;
      health.coolDown(this.index, failure.retryAfterMs ?? null);
      health.meters[this.index]!.call('http_error', (health.now() - this.startedAt) / 1000);
      this.drop();
      return;
    }
    this.settle('failed', failure === undefined ? undefined : failureOutcome(failure.kind));
  }

  /**
   * Counts the attempt's outcome in its node's health and its metrics, once; later calls do nothing. `detail`
   * is what the metrics say of it, when the caller knows more than ok or failed (default: ok, or
   * transport_error).
   */
  settle(outcome: 'ok' | 'failed', detail?: UpstreamOutcome): void {
    if (!this.open) return;
    this.open = false;
    const health = this.health;
    const u = health.upstreams[this.index]!;
    u.inflight--;
    const ms = health.now() - this.startedAt;
    u.record(outcome, ms);
    health.meters[this.index]!.call(detail ?? (outcome === 'ok' ? 'ok' : 'transport_error'), ms / 1000);
  }

  /** Forgets the attempt without an outcome: its end says nothing about the node. */
  drop(): void {
    if (!this.open) return;
    this.open = false;
    this.health.upstreams[this.index]!.inflight--;
  }

  /**
   * The answer's head went to the client and its body streams on from the node: settled in health at the head,
   * the attempt is counted in its node's `streaming` until streamEnded() (the body ended, failed, or the client
   * left), so a reload does not close the node's sockets under it (server/gateway-thread.ts).
   */
  streamBegan(): void {
    if (this.streaming) return;
    this.streaming = true;
    this.health.upstreams[this.index]!.streaming++;
  }

  /** The streamed answer is over; nothing when none began or it was ended already. */
  streamEnded(): void {
    if (!this.streaming) return;
    this.streaming = false;
    this.health.upstreams[this.index]!.streaming--;
  }
}

/**
 * A call's attempts on one chain under one RetryRule and NodeChoice: the node of each, and the deadline they share.
 * The first two are fields (most calls make one, a few two); a third and later (a policy with retries or hedges
 * above one, config chains.<slug>.failover) go to a list made when the third is.
 */
export class Attempts<A extends NodeAttempt = NodeAttempt> {
  /** When the call started, on the health clock: its first attempt may start at the same reading. */
  readonly startedAt: number;
  readonly deadline: number;
  readonly mayRetry: boolean;
  first: A | null = null;
  second: A | null = null;
  /** The third attempt and later, in order; null until a third is made. */
  later: A[] | null = null;
  /** Attempts made so far. */
  count = 0;

  constructor(
    readonly health: ChainHealth,
    readonly timeoutMs: number,
    readonly rule: RetryRule,
    /** The nodes that may take the call; null (the default): any node in rotation. */
    readonly choice: NodeChoice | null = null,
    /** The lowest head a node must have reached to take the call (node-routes.ts headFor); null (the default): none. */
    readonly minHead: number | null = null,
    /** Attempts after the first, at most, when the rule retries (default 1: one more). */
    readonly extraAttempts = 1,
  ) {
    this.startedAt = health.now();
    this.deadline = this.startedAt + timeoutMs;
    this.mayRetry = rule.retry && extraAttempts > 0;
  }

  /**
   * The node of the next attempt: for the first, one in rotation the choice allows that has reached minHead (the
   * highest ones when none has, see selection.ts); for a later one, when the rule allows one, extraAttempts are
   * not all made and enough of the deadline is left, another such node than those of the attempts made. null
   * when there is none. A later attempt may ask for a higher head than the call's (`minHead`: after an answer
   * saying a node has not the block yet, a node further ahead) and for no node at all when none has reached it
   * (`short` 'none').
   */
  nextNode(minHead: number | null = this.minHead, short: ShortOfHead = 'highest'): number | null {
    const first = this.first;
    if (first === null) return this.health.pick(undefined, this.choice, minHead, short);
    if (!this.mayRetry || this.count > this.extraAttempts) return null;
    if (this.rule.sharedDeadline && this.deadline - this.health.now() < this.rule.minLeftMs) return null;
    return this.health.pick(this.triedNodes(), this.choice, minHead, short);
  }

  /** The nodes of the attempts made (a retry's exclusions: made only when one is wanted). */
  private triedNodes(): Set<number> {
    const tried = new Set([this.first!.index]);
    if (this.second !== null) tried.add(this.second.index);
    if (this.later !== null) for (const a of this.later) tried.add(a.index);
    return tried;
  }

  /** Holds a made attempt as the first, the second or a later one. */
  hold(a: A): A {
    this.count++;
    if (this.first === null) this.first = a;
    else if (this.second === null) this.second = a;
    else (this.later ??= []).push(a);
    return a;
  }

  /** The attempt made last, or null before the first. */
  latest(): A | null {
    if (this.later !== null) return this.later[this.later.length - 1]!;
    return this.second ?? this.first;
  }

  /**
   * The timeout of an attempt starting now (`at`, when the caller has read the clock), in ms: what is left of
   * the shared deadline (at least 1), or the whole timeout.
   */
  attemptTimeoutMs(at?: number): number {
    return this.rule.sharedDeadline ? Math.max(1, this.deadline - (at ?? this.health.now())) : this.timeoutMs;
  }
}
