/**
 * The chain's choice of upstream for one forwarded call, and failover.
 *
 * A call goes to an upstream in rotation (selection.ts); with none, it fails at once ('no healthy upstream',
 * which the caller answers 502). Each attempt is counted in the upstream's health: in flight while it runs,
 * then 'ok' for any JSON-RPC answer (an error object included) or 'failed' for a connection error, timeout,
 * non-2xx status or an answer that is not JSON-RPC. An attempt the gateway drops (the client left, or another
 * attempt answered first) is not counted either way.
 *
 * A call that is not in NOT_IDEMPOTENT gets at most one more attempt, on another upstream in rotation, while
 * nothing of its answer has reached the client and its deadline (timeout_s after it started) has not passed:
 * - when the attempt fails with a connection error, timeout, reset, garbled HTTP, a 5xx or 429, or an answer
 *   that is not JSON-RPC;
 * - when a whole answer is a node error meaning "not there yet" (NOT_THERE_YET: a node a few blocks behind
 *   asked about a block it has not seen); should the retry fail, the client gets that first answer;
 * - when the attempt has not begun answering after half the deadline (a hanging node): the second attempt
 *   races the first, which keeps its own timeout, and whichever begins answering first is the answer.
 * So a client never waits longer than timeout_s for an answer to start, as with a single node.
 *
 * eth_sendRawTransaction goes to every upstream in rotation at once (broadcast.ts). eth_blockNumber is
 * answered from the heads the gateway knows when they are fresh (ChainRuntime.freshHead), and its forwarded
 * answers report the node's head.
 */
import type { ChainRuntime } from '../upstreams/chain.js';
import { broadcastTransaction } from './broadcast.js';
import { answerSoon, type ForwardCall, type ForwardFailure, forwardCall, noHealthyUpstream, NOT_IDEMPOTENT, type RoutedSink } from './forward.js';

/** What routing needs of a chain (a ChainRuntime; narrower so tests can route over stand-in upstreams). */
export type RoutedChain = Pick<ChainRuntime, 'upstreams' | 'health' | 'timeoutMs' | 'freshHead' | 'noteWrite'>;

/** Node errors that mean the node has not seen the block asked about yet (geth, reth, erigon, nethermind, besu, anvil). */
const NOT_THERE_YET = /header not found|unknown block|block not found|could not be found|BlockOutOfRange|block height is \d+ but requested/i;

/** The share of the deadline after which a silent attempt gets a second one beside it. */
const HEDGE_AFTER = 0.5;
/** A retry needs at least this much of the deadline left, in ms. */
const MIN_RETRY_MS = 100;

/** Sends one forwarded call to the chain's upstreams (see above). Sink callbacks never run before this returns. */
export function routeCall(chain: RoutedChain, method: string, paramsJson: string, idText: string, sink: RoutedSink): ForwardCall {
  if (method === 'eth_sendRawTransaction') return broadcastTransaction(chain, paramsJson, idText, sink);
  if (method === 'eth_blockNumber') {
    const head = chain.freshHead();
    if (head !== null) return answerSoon(sink, (s) => s.whole(Buffer.from(`{"jsonrpc":"2.0","id":${idText},"result":"0x${head.toString(16)}"}`)));
  }
  return failover(chain, method, paramsJson, idText, sink);
}

/** Failures worth another node: the node did not answer, or said it cannot now. */
function isRetriable(failure: ForwardFailure | undefined): boolean {
  if (failure === undefined) return false;
  if (failure.kind === 'status') return failure.status >= 500 || failure.status === 429;
  return true;
}

/** Whether a whole answer is a node error meaning "not there yet"; only answers holding an error are parsed. */
export function isNotThereYet(body: Buffer): boolean {
  if (!body.includes('"error"')) return false;
  try {
    const answer = JSON.parse(body.toString()) as { error?: { message?: unknown } };
    const message = answer.error?.message;
    return typeof message === 'string' && NOT_THERE_YET.test(message);
  } catch {
    return false;
  }
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

interface Attempt {
  index: number;
  call: ForwardCall | null;
  startedAt: number;
  /** Counted in flight and not yet settled in health. */
  open: boolean;
}

function failover(chain: RoutedChain, method: string, paramsJson: string, idText: string, sink: RoutedSink): ForwardCall {
  const health = chain.health;
  const first = health.pick();
  if (first === null) return noHealthyUpstream(sink);
  const clock = health.clock;
  const deadline = clock() + chain.timeoutMs;
  const mayRetry = !NOT_IDEMPOTENT.has(method);
  const tried = new Set<number>();
  const attempts: Attempt[] = [];
  let winner: Attempt | null = null;
  let done = false;
  let retried = false;
  /** A "not there yet" answer held while another attempt may do better. */
  let fallback: Buffer | null = null;
  let hedge: ReturnType<typeof setTimeout> | null = null;

  const label = (a: Attempt): string => health.upstreams[a.index]!.label;
  const othersOpen = (a: Attempt): boolean => attempts.some((b) => b !== a && b.open);

  function settle(a: Attempt, outcome: 'ok' | 'failed'): void {
    if (!a.open) return;
    a.open = false;
    const u = health.upstreams[a.index]!;
    u.inflight--;
    u.record(outcome, clock() - a.startedAt);
  }

  function drop(a: Attempt): void {
    if (a.open) {
      a.open = false;
      health.upstreams[a.index]!.inflight--;
    }
    a.call?.abort();
  }

  function finish(): void {
    done = true;
    if (hedge !== null) clearTimeout(hedge);
    hedge = null;
    for (const a of attempts) if (a !== winner) drop(a);
  }

  function retry(): boolean {
    if (!mayRetry || retried || done) return false;
    const remaining = deadline - clock();
    if (remaining < MIN_RETRY_MS) return false;
    const next = health.pick(tried);
    if (next === null) return false;
    retried = true;
    if (hedge !== null) clearTimeout(hedge);
    hedge = null;
    launch(next, remaining);
    return true;
  }

  function launch(index: number, timeoutMs: number): void {
    tried.add(index);
    const a: Attempt = { index, call: null, startedAt: clock(), open: true };
    attempts.push(a);
    health.upstreams[index]!.inflight++;
    a.call = forwardCall(chain.upstreams[index]!, timeoutMs, method, paramsJson, idText, {
      whole(body) {
        settle(a, 'ok');
        if (method === 'eth_blockNumber') {
          const head = headOf(body);
          if (head !== null) health.upstreams[a.index]!.reportHead(head);
        }
        if (done) return;
        if (mayRetry && isNotThereYet(body) && (othersOpen(a) || retry())) {
          fallback ??= body;
          return;
        }
        winner = a;
        finish();
        sink.whole(body);
      },
      begin(length) {
        settle(a, 'ok');
        if (done) {
          a.call?.abort();
          return;
        }
        winner = a;
        finish();
        sink.begin(length);
      },
      chunk(buf) {
        return winner === a ? sink.chunk(buf) : true;
      },
      end() {
        if (winner === a) sink.end();
      },
      fail(started, reason, failure) {
        settle(a, 'failed');
        if (winner === a) {
          sink.failedUpstream = label(a);
          sink.fail(started, reason, failure);
          return;
        }
        if (done || othersOpen(a)) return;
        if (isRetriable(failure) && retry()) return;
        finish();
        if (fallback !== null) {
          sink.whole(fallback);
        } else {
          sink.failedUpstream = label(a);
          sink.fail(false, reason, failure);
        }
      },
    });
  }

  launch(first, chain.timeoutMs);
  if (mayRetry && !done && health.upstreams.length > 1) {
    hedge = setTimeout(() => {
      hedge = null;
      if (!done && winner === null && attempts.length === 1) retry();
    }, chain.timeoutMs * HEDGE_AFTER);
    hedge.unref?.();
  }
  return {
    abort() {
      if (done) {
        winner?.call?.abort();
        return;
      }
      finish();
      winner = null;
    },
    resume() {
      winner?.call?.resume();
    },
  };
}
