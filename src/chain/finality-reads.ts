/**
 * The two ways a chain's finality is read (finality.ts keeps what they read):
 * - with a beacon chain (chains.<slug>.beacon): that chain's finalized and current justified checkpoints
 *   (GET /eth/v1/beacon/states/head/finality_checkpoints), each root mapped to the execution block its beacon
 *   block carries (GET /eth/v2/beacon/blocks/{root} → data.message.body.execution_payload);
 * - without: the nodes' own blocks at `finalized` and `safe` (eth_getBlockByNumber, hashes only).
 * Either goes to the chain's nodes in rotation (those that serve the method), moved once to another node when one
 * fails, each attempt counted in that chain's health and metrics: the road of ChainRuntime.call, with the answer's
 * size bounded, since a reading every few seconds must never read a node's megabytes (ChainRuntime.call reads
 * whatever comes). A reader never rejects: what it could not read is null (unknown), and the block held stays.
 */
import type { ChainConfig } from '../config/schema.js';
import { gatewayIdText } from '../upstreams/call-ids.js';
import { fetchSmallJson } from '../upstreams/head-probe.js';
import type { UpstreamRequest } from '../upstreams/http-client.js';
import type { NodeChoice } from '../upstreams/selection.js';
import { Attempts, failureOutcome, NodeAttempt, RETRY_ONCE } from './attempts.js';
import type { FinalBlock, FinalityReading, ReadFinality } from './finality.js';
import type { ChainRuntime } from './runtime.js';

/** The parts of a beacon chain's runtime its checkpoints are read through. */
export type BeaconChain = Pick<ChainRuntime, 'health' | 'upstreams' | 'timeoutMs'>;
/** The parts of an evm chain's runtime its nodes' own blocks are read through. */
export type EvmChain = BeaconChain & Pick<ChainRuntime, 'routes'>;

/** One finality read waits this long at most for a node, in ms (under the chain's timeout_s): a hung node must not
 *  hold the next reading for the call timeout. */
export const FINALITY_CALL_TIMEOUT_MS = 10_000;

/** A finality_checkpoints answer is a few hundred bytes. */
const CHECKPOINTS_MAX_BYTES = 16_384;
/** A beacon block in JSON holds its transactions: a full mainnet block is a few MB of hex. */
const BEACON_BLOCK_MAX_BYTES = 32 * 1024 * 1024;
/** A block with its transactions' hashes only: 66 bytes a transaction, so thousands fit. */
const EVM_BLOCK_MAX_BYTES = 4 * 1024 * 1024;
/** Checkpoint roots whose execution block is remembered: the few recent ones (two move once an epoch). */
const ROOTS_KEPT = 16;

const NOTHING: FinalityReading = Object.freeze({ finalized: null, safe: null });
const ROOT = /^0x[0-9a-f]{64}$/;
const ZERO_ROOT = `0x${'0'.repeat(64)}`;
const DECIMAL = /^(?:0|[1-9][0-9]{0,15})$/;
const QUANTITY = /^0x(?:0|[1-9a-f][0-9a-f]{0,12})$/;
const ACCEPT_JSON: Array<[string, string]> = [['accept', 'application/json']];
const JSON_BODY: Array<[string, string]> = [['content-type', 'application/json']];

/** How chain `config` reads its finality: from its beacon chain when it names one, else from `chain`'s nodes; a
 *  beacon chain itself has no execution blocks, so none (and no call is made). */
export function finalityReader(config: ChainConfig, beacon: (() => BeaconChain | null) | undefined, chain: EvmChain): ReadFinality {
  if (config.kind === 'beacon') return async () => NOTHING;
  return beacon !== undefined ? readBeaconFinality(beacon) : readNodeFinality(chain);
}

/** The nodes' own `finalized` and `safe` blocks; a node that does not know a tag (an error) leaves it unknown. */
export function readNodeFinality(chain: EvmChain): ReadFinality {
  const blockAt = async (tag: 'finalized' | 'safe', signal: AbortSignal): Promise<FinalBlock | null> => {
    const params = [tag, false];
    try {
      const answer = await ownRead(
        chain,
        (timeoutMs) => {
          const id = gatewayIdText();
          const body = `{"jsonrpc":"2.0","id":${id},"method":"eth_getBlockByNumber","params":${JSON.stringify(params)}}`;
          return { req: { method: 'POST', headers: JSON_BODY, body, timeoutMs }, id };
        },
        chain.routes.nodesFor('eth_getBlockByNumber', params),
        EVM_BLOCK_MAX_BYTES,
        signal,
      );
      const block = (answer as { result?: { number?: unknown; hash?: unknown } | null }).result;
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
  const get = (chain: BeaconChain, path: string, maxBytes: number, signal: AbortSignal): Promise<unknown> =>
    ownRead(chain, (timeoutMs) => ({ req: { method: 'GET', path, headers: ACCEPT_JSON, timeoutMs } }), null, maxBytes, signal);
  const blockOf = async (chain: BeaconChain, root: unknown, signal: AbortSignal): Promise<FinalBlock | null> => {
    const key = typeof root === 'string' ? root.toLowerCase() : '';
    if (!ROOT.test(key) || key === ZERO_ROOT) return null;
    const known = blocks.get(key);
    if (known !== undefined) return known;
    let answer: unknown;
    try {
      answer = await get(chain, `/eth/v2/beacon/blocks/${key}`, BEACON_BLOCK_MAX_BYTES, signal);
    } catch {
      return null;
    }
    type Payload = { block_number?: unknown; block_hash?: unknown };
    const payload = (answer as { data?: { message?: { body?: { execution_payload?: Payload } } } } | null)?.data?.message?.body
      ?.execution_payload;
    const block = finalBlock(payload?.block_number, payload?.block_hash, DECIMAL, 10);
    if (blocks.size >= ROOTS_KEPT) blocks.delete(blocks.keys().next().value!);
    blocks.set(key, block);
    return block;
  };
  return async (signal): Promise<FinalityReading> => {
    const chain = beacon();
    if (chain === null) return NOTHING;
    let answer: unknown;
    try {
      answer = await get(chain, '/eth/v1/beacon/states/head/finality_checkpoints', CHECKPOINTS_MAX_BYTES, signal);
    } catch {
      return NOTHING;
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
 * One read of the gateway's own on `chain`'s nodes in rotation that `choice` allows, moved once to another node
 * when one fails (RETRY_ONCE: a read may reach two nodes). `make` gives each attempt its request (and the JSON-RPC
 * id it carries, which the answer must carry back). A node's answer outside 2xx counts as an answer (the node is
 * up; a 5xx as a failure) and is asked of the other node too: a node behind may not have the block yet. An answer
 * over `maxBytes` is given up without a verdict on the node: it is not what was asked, but says nothing of its
 * health. Resolves with the parsed answer; rejects with the last failure.
 */
async function ownRead(
  chain: BeaconChain,
  make: (timeoutMs: number) => { req: UpstreamRequest; id?: string },
  choice: NodeChoice | null,
  maxBytes: number,
  signal: AbortSignal,
): Promise<unknown> {
  const { health, upstreams } = chain;
  const tries = new Attempts(health, Math.min(chain.timeoutMs, FINALITY_CALL_TIMEOUT_MS), RETRY_ONCE, choice);
  let lastError: unknown = new Error('no healthy upstream');
  for (let index = tries.nextNode(); index !== null; index = tries.nextNode()) {
    const attempt = tries.hold(new NodeAttempt(health, index));
    try {
      const { req, id } = make(tries.attemptTimeoutMs());
      const answer = await fetchSmallJson(upstreams[index]!, req, signal, id, maxBytes);
      attempt.settle('ok');
      return answer;
    } catch (err) {
      const e = err as Error & { status?: number; tooLarge?: boolean };
      if (signal.aborted || e.tooLarge === true) attempt.drop();
      else if (e.status !== undefined) attempt.settle(e.status >= 500 ? 'failed' : 'ok', 'http_error');
      // fetchSmallJson names a transport failure's kind first (`timeout: ...`).
      else attempt.settle('failed', failureOutcome(String(e.message).split(':', 1)[0]!));
      if (signal.aborted) throw err;
      lastError = err;
    }
  }
  throw lastError;
}
