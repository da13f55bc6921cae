/**
 * The shape of one catalogue entry and the positional check every family shares. The families
 * (methods-eth.ts, methods-trace.ts, methods-txpool.ts) declare the rules; methods.ts puts them in one
 * catalogue of MethodRows, one per method with every trait, and decides a call's fate.
 */
import { type BlockSite, blockSiteOf } from './block-refs.js';
import { checkAddress, checkBlockReference, checkBlockTag, checkBoolean, checkHash, checkObject, type Check } from './param-types.js';

/** What a call's answer depends on besides its method and params. */
export interface CallContext {
  chainId: number;
  transport: 'http' | 'ws';
}

/** One positional parameter. Required unless `optional`; an optional one omitted or null takes `fill` upstream. */
export interface ParamRule {
  readonly name: string;
  readonly check: Check;
  readonly optional?: boolean;
  readonly fill?: unknown;
  /** Rewrites an accepted alternative spelling into the canonical one before the check. */
  readonly normalize?: (value: unknown) => unknown;
}

/**
 * How a cacheable method names its block, which decides whether a key can be made before forwarding
 * (cacheability.ts). An answer is kept only when no later block can change it.
 */
export type BlockSource =
  /** No block: the answer is fixed per chain. */
  | 'chain'
  /** params[0] is a block number or tag; only a number is cacheable. */
  | 'number-param'
  /** params[0] is a hash (of a block or transaction); the answer says which block. */
  | 'hash-param'
  /** params[0] is a block reference (number, tag, hash, EIP-1898 object). */
  | 'reference-param'
  /** params[0] is a log filter (or trace_filter's filter: a range, never a blockHash). */
  | 'filter';

/**
 * Which of the gateway's checks a whole answer of the method gets (chain/answer-checks.ts): a block asked by
 * number or by hash, logs against their blocks' blooms, receipts against the blocks the chain knows.
 */
export type AnswerCheckKind = 'block-by-number' | 'block-by-hash' | 'logs' | 'receipts';

/** One method as its family declares it; an omitted trait takes the default its comment gives. */
export interface MethodRule {
  /** Default RU cost when it differs from DEFAULT_RU_OTHER. */
  readonly ru?: number;
  readonly params: readonly ParamRule[];
  /** Subscriptions live on a connection, so over HTTP they are refused before any check. */
  readonly wsOnly?: boolean;
  /** Replaces the positional rules when the shape of the params depends on the first one. */
  readonly shape?: (params: unknown[]) => unknown[] | string;
  /** Answered by the gateway: returns the JSON text of `result`. */
  readonly answer?: (params: unknown[], ctx: CallContext) => string;
  /**
   * Heavy for the node whatever it costs in RU: a re-execution with a tracer (up to a whole block's), or a
   * mempool's whole contents. The keyless path denies these by default (public.methods.deny); default false.
   */
  readonly heavy?: boolean;
  /**
   * Safe to send twice; default true. False for calls whose repetition has an effect (a transaction, filter
   * creation and removal, a poll, which consumes the changes it returns): neither the upstream client (moving
   * or re-sending, or pipelining it beside others) nor the gateway's failover (route-call.ts) sends one twice.
   */
  readonly repeatable?: boolean;
  /**
   * May ride on an identical call in flight (chain/dedup.ts); default true. False for calls whose repetition
   * has an effect or whose answer belongs to one caller: filter logs (a filter is one client's), subscriptions
   * (they live on a connection).
   */
  readonly shareable?: boolean;
  /** Answered by the gateway's own filters (pipeline/filter-calls.ts, chain/filters.ts), never forwarded; default false. */
  readonly filter?: boolean;
  /** How the response cache may keep its answer (cacheability.ts); absent: never kept. */
  readonly cache?: BlockSource;
  /** Over a WebSocket, answered by the connection from its own subscriptions (pipeline/subscription-calls.ts); default false. */
  readonly wsLocal?: boolean;
  /**
   * A state read (its answer needs the state of one block): the position of its block reference in the
   * params. A state read about an old block goes to an archive node (state-reads.ts, chain/node-routes.ts).
   */
  readonly stateBlockAt?: number;
  /**
   * Names no block but answers about the head itself (eth_blockNumber, the fee estimates): it reads at `latest`
   * (block-refs.ts), so on a chain of several nodes it goes to a node that has reached the served head; default false.
   */
  readonly atHead?: boolean;
  /**
   * A `null` result means the node does not have what was asked (a block, a transaction, a receipt): on a chain
   * of several nodes it is asked once more of a node further ahead (pipeline/route-call.ts); default false.
   */
  readonly nullIfMissing?: boolean;
  /** How its whole answers are checked (chain/answer-checks.ts); absent: not checked, at the cost of one field read. */
  readonly answerCheck?: AnswerCheckKind;
}

/**
 * A catalogue row: one method with every trait, the declaration's defaults filled in. Every row has the same
 * fields set in the same order, so the per-call reads of a row (one Map get in checkCall, then the row travels
 * with the call) stay monomorphic.
 */
export class MethodRow {
  readonly ru: number | undefined;
  readonly params: readonly ParamRule[];
  readonly wsOnly: boolean;
  readonly shape: MethodRule['shape'];
  readonly answer: MethodRule['answer'];
  readonly heavy: boolean;
  readonly repeatable: boolean;
  readonly shareable: boolean;
  readonly filter: boolean;
  readonly cache: BlockSource | null;
  readonly wsLocal: boolean;
  readonly stateBlockAt: number | null;
  /** Where its calls name their block, read once from its parameter rules (block-refs.ts); null: they name none. */
  readonly blockSite: BlockSite | null;
  readonly nullIfMissing: boolean;
  readonly answerCheck: AnswerCheckKind | null;
  /** What a forwarded call's body holds between its id and its params' text, written once per method. */
  readonly bodyMiddle: string;

  constructor(
    /** The method's name, as a call names it. */
    readonly name: string,
    rule: MethodRule,
  ) {
    this.ru = rule.ru;
    this.params = rule.params;
    this.wsOnly = rule.wsOnly === true;
    this.shape = rule.shape;
    this.answer = rule.answer;
    this.heavy = rule.heavy === true;
    this.repeatable = rule.repeatable !== false;
    this.shareable = rule.shareable !== false;
    this.filter = rule.filter === true;
    this.cache = rule.cache ?? null;
    this.wsLocal = rule.wsLocal === true;
    this.stateBlockAt = rule.stateBlockAt ?? null;
    this.blockSite = blockSiteOf(rule.params, rule.atHead === true);
    this.nullIfMissing = rule.nullIfMissing === true;
    this.answerCheck = rule.answerCheck ?? null;
    this.bodyMiddle = `,"method":${JSON.stringify(name)},"params":`;
  }
}

export const required = (name: string, check: Check, normalize?: (v: unknown) => unknown): ParamRule =>
  normalize === undefined ? { name, check } : { name, check, normalize };
export const optional = (name: string, check: Check, fill?: unknown): ParamRule =>
  fill === undefined ? { name, check, optional: true } : { name, check, optional: true, fill };

/** The parameters several families share, named as the messages name them. */
export const ADDRESS = required('address', checkAddress);
/** The block a state read or a simulation runs against; omitted means latest, whatever the node. */
export const STATE_BLOCK = optional('block', checkBlockReference, 'latest');
export const BLOCK = required('block', checkBlockTag);
export const BLOCK_HASH = required('blockHash', checkHash);
export const TX_HASH = required('transactionHash', checkHash);
export const FULL_TXS = optional('fullTransactions', checkBoolean, false);
export const STATE_OVERRIDE = optional('stateOverride', checkObject);
export const BLOCK_OVERRIDES = optional('blockOverrides', checkObject);
export const NONE: readonly ParamRule[] = [];

/** Returns the params to forward (the same array when nothing was filled or rewritten) or the refusal. */
export function checkPositional(method: string, rules: readonly ParamRule[], params: unknown[]): unknown[] | string {
  if (params.length > rules.length) {
    return rules.length === 0
      ? `${method} takes no parameters`
      : `${method} takes at most ${rules.length} parameter${rules.length === 1 ? '' : 's'}, got ${params.length}`;
  }
  let out: unknown[] | undefined;
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    let value = params[i];
    if (value === undefined || value === null) {
      if (rule.optional !== true) return `missing '${rule.name}'`;
      if (rule.fill !== undefined) {
        out ??= params.slice();
        while (out.length < i) out.push(null);
        out[i] = rule.fill;
      }
      continue;
    }
    if (rule.normalize !== undefined) {
      const normalized = rule.normalize(value);
      if (normalized !== value) (out ??= params.slice())[i] = value = normalized;
    }
    const problem = rule.check(value, rule.name);
    if (problem !== undefined) return problem;
  }
  return out ?? params;
}
