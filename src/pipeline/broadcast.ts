/**
 * eth_sendRawTransaction on a chain with several nodes: sent exactly once to every upstream in rotation that
 * serves it (an upstream whose methods.deny names it takes none) and has room in its budget (rps, max_in_flight,
 * a 429's cooldown: 503 upstream_budget when none has) at once, never retried (forward.ts sends it exclusive, so the upstream client never re-sends it either).
 *
 * - The first acceptance answers the client: a transaction hash, or a node saying it already has the
 *   transaction (ALREADY_KNOWN), which is answered as the hash itself since the transaction is in a pool.
 * - When every node has settled without accepting, the first rejection to arrive is the answer; with no
 *   JSON-RPC answer at all, the call fails (502) with the first failure.
 * - A node that rejects while another accepts (e.g. "nonce too low" from one that already mined it) changes
 *   nothing: the acceptance answers.
 *
 * The client leaving does not stop the sends: a transaction that may have reached one node is best sent to
 * all. Each send is counted in its upstream's health like any forwarded call.
 */
import { keccak_256 } from '@noble/hashes/sha3.js';
import { failureOutcome, fanOutNodes, isRpcError, NodeAttempt } from '../chain/attempts.js';
import { methodRow } from '../jsonrpc/methods.js';
import type { UpstreamOutcome } from '../metrics/registry.js';
import type { NodeChoice } from '../upstreams/selection.js';
import { type ForwardCall, type ForwardFailure, forwardCall, noHealthyUpstream, type RoutedSink } from './forward.js';
import type { RoutedChain } from './route-call.js';

/** Node errors saying the transaction is already in its pool (geth, erigon, reth, nethermind, besu, anvil). */
const ALREADY_KNOWN = /already known|known transaction|alreadyknown|already imported/i;

/** The catalogue's row of the one method this module sends (not repeatable: each send goes out exclusive). */
const SEND_RAW_TRANSACTION = methodRow('eth_sendRawTransaction')!;

type Verdict = 'accepted' | 'known' | 'rejected';

function verdictOf(body: Buffer): Verdict {
  try {
    const answer = JSON.parse(body.toString()) as { result?: unknown; error?: { message?: unknown } };
    if (answer.error === undefined || answer.error === null) return answer.result === undefined ? 'rejected' : 'accepted';
    const message = answer.error.message;
    return typeof message === 'string' && ALREADY_KNOWN.test(message) ? 'known' : 'rejected';
  } catch {
    return 'rejected';
  }
}

/** The transaction hash: keccak-256 of the raw bytes as sent (the typed envelope included). */
function transactionHash(paramsJson: string): string | null {
  try {
    const raw = (JSON.parse(paramsJson) as unknown[])[0];
    if (typeof raw !== 'string' || !/^0x(?:[0-9a-f]{2})*$/i.test(raw)) return null;
    return `0x${Buffer.from(keccak_256(Buffer.from(raw.slice(2), 'hex'))).toString('hex')}`;
  } catch {
    return null;
  }
}

export function broadcastTransaction(
  chain: RoutedChain,
  paramsJson: string,
  idText: string,
  sink: RoutedSink,
  nodes: NodeChoice | null = null,
): ForwardCall {
  const health = chain.health;
  // A node at its budget (rps, max_in_flight, a 429's cooldown) is not sent the transaction: a provider's quota
  // holds for broadcasts too. Every tier is sent it: more nodes spread it sooner.
  const targets = fanOutNodes(health, nodes);
  if (targets === null) return noHealthyUpstream(sink);
  if (targets.length === 0) return noHealthyUpstream(sink, health.shortOfBudget);
  let answered = false;
  let silenced = false;
  let pending = targets.length;
  let firstRejection: Buffer | null = null;
  let firstFailure: { label: string; reason: string; failure: ForwardFailure | undefined } | null = null;

  const answer = (deliver: () => void): void => {
    answered = true;
    if (!silenced) deliver();
  };

  const accept = (body: Buffer): void => {
    if (answered) return;
    chain.noteWrite();
    answer(() => sink.whole(body));
  };

  const settled = (): void => {
    if (--pending > 0 || answered) return;
    if (firstRejection !== null) {
      const body = firstRejection;
      answer(() => sink.whole(body));
    } else {
      const f = firstFailure!;
      sink.failedUpstream = f.label;
      answer(() => sink.fail(false, f.reason, f.failure));
    }
  };

  for (const index of targets) {
    const u = health.upstreams[index]!;
    // Counted in the node's health as every attempt is (chain/attempts.ts); a broadcast never retries.
    const attempt = new NodeAttempt(health, index);
    const record = (outcome: 'ok' | 'failed', detail?: UpstreamOutcome): void => attempt.settle(outcome, detail);
    const call: ForwardCall = forwardCall(chain.upstreams[index]!, chain.timeoutMs, SEND_RAW_TRANSACTION, paramsJson, idText, {
      whole(body) {
        record('ok', isRpcError(body) ? 'rpc_error' : 'ok');
        const verdict = verdictOf(body);
        if (verdict === 'accepted') {
          accept(body);
        } else if (verdict === 'known') {
          const hash = transactionHash(paramsJson);
          if (hash !== null) accept(Buffer.from(`{"jsonrpc":"2.0","id":${idText},"result":"${hash}"}`));
          else firstRejection ??= body;
        } else {
          firstRejection ??= body;
        }
        settled();
      },
      begin() {
        // Tens of kilobytes in answer to a transaction is no answer to it.
        record('failed');
        call.abort();
        firstFailure ??= { label: u.label, reason: 'upstream answer to eth_sendRawTransaction is too large', failure: { kind: 'invalid' } };
        settled();
      },
      chunk() {
        return true;
      },
      end() {},
      fail(_started, reason, failure) {
        record('failed', failure === undefined ? undefined : failureOutcome(failure.kind));
        firstFailure ??= { label: u.label, reason, failure };
        settled();
      },
    });
  }

  return {
    abort() {
      silenced = true;
    },
    resume() {},
  };
}
