/**
 * The two ways a chain's finality is read (finality.ts keeps what they read):
 * - with a beacon chain (chains.<slug>.beacon): that chain's finalized and current justified checkpoints
 *   (GET /eth/v1/beacon/states/head/finality_checkpoints), each root mapped to the execution block its beacon
 *   block carries (GET /eth/v2/beacon/blocks/{root} → data.message.body.execution_payload), asked of the beacon
 *   chain's nodes in rotation with one move to another node, as the gateway's own calls are (ChainRuntime.call);
 * - without: the nodes' own blocks at `finalized` and `safe` (eth_getBlockByNumber through ChainRuntime.call).
 * A reader never rejects: what it could not read is null (unknown), and the block held stays.
 */
import type { ChainConfig } from '../config/schema.js';
import { Attempts, failureOutcome, NodeAttempt, RETRY_ONCE } from './attempts.js';
import type { FinalBlock, FinalityReading, ReadFinality } from './finality.js';
import type { ChainRuntime } from './runtime.js';
import { fetchSmallJson } from '../upstreams/head-probe.js';

/** The parts of a beacon chain's runtime its finality is read through. */
export type BeaconChain = Pick<ChainRuntime, 'health' | 'upstreams' | 'timeoutMs'>;

/** One finality read waits this long at most for a node, in ms (under the chain's timeout_s): a hung node must not
 *  hold the next reading for the call timeout. */
export const FINALITY_CALL_TIMEOUT_MS = 10_000;

/** A finality_checkpoints answer is a few hundred bytes. */
const CHECKPOINTS_MAX_BYTES = 16_384;
/** A beacon block in JSON holds its transactions: a full mainnet block is a few MB of hex. */
const BLOCK_MAX_BYTES = 32 * 1024 * 1024;
/** Checkpoint roots whose execution block is remembered: the few recent ones (two move once an epoch). */
const ROOTS_KEPT = 16;

const ROOT = /^0x[0-9a-f]{64}$/;
const ZERO_ROOT = `0x${'0'.repeat(64)}`;
const DECIMAL = /^(?:0|[1-9][0-9]{0,15})$/;
const QUANTITY = /^0x(?:0|[1-9a-f][0-9a-f]{0,12})$/;
const ACCEPT_JSON: Array<[string, string]> = [['accept', 'application/json']];

/** How chain `config` reads its finality: from its beacon chain when it names one, else its nodes; a beacon chain
 *  itself has no execution blocks, so none (and no call is made). */
export function finalityReader(
  config: ChainConfig,
  beacon: (() => BeaconChain | null) | undefined,
  call: ChainRuntime['call'],
): ReadFinality {
  if (config.kind === 'beacon') return async () => ({ finalized: null, safe: null });
  return beacon !== undefined ? readBeaconFinality(beacon) : readNodeFinality(call);
}

/** The nodes' own `finalized` and `safe` blocks; a node that does not know a tag (an error) leaves it unknown. */
export function readNodeFinality(call: ChainRuntime['call']): ReadFinality {
  const blockAt = async (tag: 'finalized' | 'safe', signal: AbortSignal): Promise<FinalBlock | null> => {
    try {
      const block = (await call('eth_getBlockByNumber', [tag, false], signal)) as { number?: unknown; hash?: unknown } | null;
      return finalBlock(block?.number, block?.hash, QUANTITY, 16);
    } catch {
      return null;
    }
  };
  return async (signal) => {
    const [finalized, safe] = await Promise.all([blockAt('finalized', signal), blockAt('safe', signal)]);
    return { finalized, safe };
  };
}

/** A block from a node's number (hex, or decimal for a beacon payload) and hash, or null when either is not one. */
function finalBlock(number: unknown, hash: unknown, form: RegExp, radix: 10 | 16): FinalBlock | null {
  if (typeof number !== 'string' || typeof hash !== 'string') return null;
  const lower = hash.toLowerCase();
  if (!form.test(number.toLowerCase()) || !ROOT.test(lower) || lower === ZERO_ROOT) return null;
  return { number: radix === 16 ? parseInt(number, 16) : Number(number), hash: lower };
}

/**
 * The checkpoints of the beacon chain `beacon()` gives (null while it has none: a reload removed it) as execution
 * blocks. Each root's block is asked once and remembered (ROOTS_KEPT); a zero root or a pre-merge block (no
 * execution payload) is remembered as unknown, a failed ask is asked again at the next reading.
 */
export function readBeaconFinality(beacon: () => BeaconChain | null): ReadFinality {
  const blocks = new Map<string, FinalBlock | null>();
  const blockOf = async (chain: BeaconChain, root: unknown, signal: AbortSignal): Promise<FinalBlock | null> => {
    const key = typeof root === 'string' ? root.toLowerCase() : '';
    if (!ROOT.test(key) || key === ZERO_ROOT) return null;
    const known = blocks.get(key);
    if (known !== undefined) return known;
    let answer: unknown;
    try {
      answer = await beaconGet(chain, `/eth/v2/beacon/blocks/${key}`, BLOCK_MAX_BYTES, signal);
    } catch {
      return null;
    }
    const payload = (answer as { data?: { message?: { body?: { execution_payload?: { block_number?: unknown; block_hash?: unknown } } } } })
      ?.data?.message?.body?.execution_payload;
    const block = finalBlock(payload?.block_number, payload?.block_hash, DECIMAL, 10);
    if (blocks.size >= ROOTS_KEPT) blocks.delete(blocks.keys().next().value!);
    blocks.set(key, block);
    return block;
  };
  return async (signal): Promise<FinalityReading> => {
    const chain = beacon();
    if (chain === null) return { finalized: null, safe: null };
    let answer: unknown;
    try {
      answer = await beaconGet(chain, '/eth/v1/beacon/states/head/finality_checkpoints', CHECKPOINTS_MAX_BYTES, signal);
    } catch {
      return { finalized: null, safe: null };
    }
    const data = (answer as { data?: { finalized?: { root?: unknown }; current_justified?: { root?: unknown } } } | null)?.data;
    const [finalized, safe] = await Promise.all([
      blockOf(chain, data?.finalized?.root, signal),
      blockOf(chain, data?.current_justified?.root, signal),
    ]);
    return { finalized, safe };
  };
}

/**
 * A GET of the gateway's own on the beacon chain's nodes in rotation, moved once to another node when one fails
 * (RETRY_ONCE: a GET may reach two nodes), each attempt counted in the beacon chain's health and metrics as its
 * calls are. A node's answer outside 2xx counts as an answer (the node is up; a 5xx as a failure) and is asked
 * of the other node too: a node behind may not have the block yet. Rejects with the last failure.
 */
async function beaconGet(chain: BeaconChain, path: string, maxBytes: number, signal: AbortSignal): Promise<unknown> {
  const { health, upstreams } = chain;
  const tries = new Attempts(health, Math.min(chain.timeoutMs, FINALITY_CALL_TIMEOUT_MS), RETRY_ONCE);
  let lastError: unknown = new Error('no healthy upstream');
  for (let index = tries.nextNode(); index !== null; index = tries.nextNode()) {
    const attempt = tries.hold(new NodeAttempt(health, index));
    try {
      const req = { method: 'GET' as const, path, headers: ACCEPT_JSON, timeoutMs: tries.attemptTimeoutMs() };
      const answer = await fetchSmallJson(upstreams[index]!, req, signal, undefined, maxBytes);
      attempt.settle('ok');
      return answer;
    } catch (err) {
      if (signal.aborted) {
        attempt.drop();
        throw err;
      }
      const status = (err as { status?: number }).status;
      if (status !== undefined) attempt.settle(status >= 500 ? 'failed' : 'ok', 'http_error');
      // fetchSmallJson names a transport failure's kind first (`timeout: ...`).
      else attempt.settle('failed', failureOutcome(String((err as Error).message).split(':', 1)[0]!));
      lastError = err;
    }
  }
  throw lastError;
}
