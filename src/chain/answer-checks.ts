/**
 * Cheap integrity checks on nodes' whole answers (config chains.<slug>.consistency.checks, default true), each
 * made from the answer, the call's params and the recent blocks the chain knows (known-blocks.ts), never from
 * a call of its own:
 * - `block`: eth_getBlockByNumber(N) answers block N, eth_getBlockByHash(h) block h, and a block of a number
 *   the chain knows has the hash it knows;
 * - `logs_bloom`: each log of eth_getLogs (and of the filters' eth_getLogs, chain/filters.ts) in a known block
 *   has its address and topics in that block's logsBloom;
 * - `receipt_block`: a receipt (eth_getTransactionReceipt, eth_getBlockReceipts) of a known block number names
 *   the known block's hash.
 * A failed check is a node failure (the caller retries the call on another node, chaingate_upstream_check_failures_total
 * counts it, the log says it); a null answer or a node's error passes (they are not this file's to judge).
 *
 * A known block whose bloom says it may hold logs the filter matches, asked about by a numbered range or its hash,
 * but of which the answer holds none, makes the answer suspect: the caller asks another node, and serves the
 * first answer when there is none. Blooms have false positives, so a second node's answer without them either
 * is served; one with them proves the first node left logs out, and that node's failure is counted then.
 *
 * The known blocks come from one node's feed. Should a second node make the very claim a first node failed for
 * (the same hash for the same block), the two agree against the gateway's view, which may be a moment late (a
 * reorg not heard yet) or come from a node in error: the second answer is served, and the disagreement logged.
 */
import type { ChainConfig } from '../config/schema.js';
import type { Feeds } from '../fanout/feeds.js';
import { forEachTopMember } from '../jsonrpc/accepted-answer.js';
import { type BloomBits, bloomHas, filterMayMatch, itemBits } from '../jsonrpc/logs-bloom.js';
import type { AnswerCheckKind, MethodRow } from '../jsonrpc/method-rule.js';
import { stringEnd } from '../jsonrpc/whole-answer.js';
import type { Logger } from '../log.js';
import type { CheckName, UpstreamMetrics } from '../metrics/registry.js';
import { createRepeatedLog, type RepeatedLog } from '../repeated-log.js';
import { KnownBlocks } from './known-blocks.js';

export type { CheckName } from '../metrics/registry.js';

/** What the caller does with an answer: serve it, ask another node first (keeping it), or count a node failure. */
export type Verdict = 'pass' | 'suspect' | 'fail';

/** The reason a call fails with when its last answer failed a check: the pipeline answers it as upstream_answer_invalid. */
export const FAILED_CHECK_REASON = "upstream answer failed the gateway's checks";

/** What one answer shows: `withLogs`, the known blocks it holds logs of; `claim`, what a failed answer said. */
export type Finding =
  | { kind: 'pass'; withLogs?: ReadonlySet<number> }
  | { kind: 'suspect'; blocks: readonly number[]; withLogs: ReadonlySet<number> }
  | { kind: 'fail'; check: CheckName; claim: string };

const PASS: Finding = { kind: 'pass' };

/** The blocks a chain knows, as the checks read them. */
export type KnownView = Pick<KnownBlocks, 'at' | 'withHash' | 'all'>;

/** A block number written as a quantity, or null. */
function quantity(v: unknown): number | null {
  return typeof v === 'string' && /^0x[0-9a-fA-F]{1,13}$/.test(v) ? parseInt(v, 16) : null;
}

const lower = (v: unknown): string | null => (typeof v === 'string' ? v.toLowerCase() : null);

/**
 * The `block` check of a block answer (`answered`: its number and hash as written, null for a null result),
 * asked by `asked.number` or `asked.hash` (neither for a tag).
 */
export function checkBlock(known: KnownView, asked: { number?: number; hash?: string }, answered: BlockFields | null): Finding {
  if (answered === null) return PASS;
  const number = quantity(answered.number);
  const hash = lower(answered.hash);
  if (asked.number !== undefined && number !== asked.number)
    return { kind: 'fail', check: 'block', claim: `block ${asked.number} is number ${answered.number}` };
  if (asked.hash !== undefined) {
    if (hash !== asked.hash.toLowerCase()) return { kind: 'fail', check: 'block', claim: `block ${asked.hash} is ${hash}` };
    return PASS;
  }
  const kb = number === null ? undefined : known.at(number);
  if (kb !== undefined && hash !== null && kb.hash !== hash) return { kind: 'fail', check: 'block', claim: `block ${number} is ${hash}` };
  return PASS;
}

/** The `receipt_block` check of a receipt, or a list of them. */
export function checkReceipts(known: KnownView, result: unknown): Finding {
  const receipts = Array.isArray(result) ? result : [result];
  for (const r of receipts) {
    if (r === null || typeof r !== 'object') continue;
    const { blockNumber, blockHash } = r as Record<string, unknown>;
    const number = quantity(blockNumber);
    const hash = lower(blockHash);
    const kb = number === null ? undefined : known.at(number);
    if (kb !== undefined && hash !== null && kb.hash !== hash)
      return { kind: 'fail', check: 'receipt_block', claim: `receipt in block ${number} of ${hash}` };
  }
  return PASS;
}

/** The bounds of a filter's range when both are numbers (or earliest), or its blockHash's block when known; else null. */
function rangeOf(known: KnownView, filter: Record<string, unknown>): readonly [number, number] | null {
  if (typeof filter.blockHash === 'string') {
    const kb = known.withHash(filter.blockHash);
    return kb === undefined ? null : [kb.number, kb.number];
  }
  const end = (v: unknown): number | null => (v === 'earliest' ? 0 : quantity(v));
  const from = end(filter.fromBlock);
  const to = end(filter.toBlock);
  return from === null || to === null ? null : [from, to];
}

/** The `logs_bloom` check of eth_getLogs `filter`'s answer `logs` (see the top of this file). */
export function checkLogs(known: KnownView, filter: Record<string, unknown>, logs: unknown): Finding {
  if (!Array.isArray(logs)) return PASS;
  const memo = new Map<string, BloomBits | null>();
  const withLogs = new Set<number>();
  for (const log of logs) {
    if (log === null || typeof log !== 'object') continue;
    const l = log as Record<string, unknown>;
    const number = quantity(l.blockNumber);
    const kb = number === null ? undefined : known.at(number);
    // A log of another block at that number (a branch the chain does not know) says nothing of the known one.
    if (
      kb === undefined ||
      kb.bloom === null ||
      l.removed === true ||
      (typeof l.blockHash === 'string' && l.blockHash.toLowerCase() !== kb.hash)
    )
      continue;
    withLogs.add(kb.number);
    const address = itemBits(l.address, 20, memo);
    let held = address !== null && bloomHas(kb.bloom, address);
    if (held && Array.isArray(l.topics))
      for (const topic of l.topics) {
        const bits = itemBits(topic, 32, memo);
        if (bits === null || !bloomHas(kb.bloom, bits)) held = false;
      }
    if (!held) return { kind: 'fail', check: 'logs_bloom', claim: `log of ${String(l.address)} in block ${kb.hash}` };
  }
  const range = rangeOf(known, filter);
  if (range === null) return { kind: 'pass', withLogs };
  const suspects: number[] = [];
  for (const kb of known.all())
    if (
      kb.number >= range[0] &&
      kb.number <= range[1] &&
      kb.bloom !== null &&
      !withLogs.has(kb.number) &&
      filterMayMatch(kb.bloom, filter, memo)
    )
      suspects.push(kb.number);
  return suspects.length === 0 ? { kind: 'pass', withLogs } : { kind: 'suspect', blocks: suspects, withLogs };
}

/** A block answer's number and hash as written (undefined when absent). */
export interface BlockFields {
  number: unknown;
  hash: unknown;
}

/** Whether the member name spanning [from, to) (quotes included) is `word`, as nodes write it (no escapes). */
function nameIs(body: Buffer, from: number, to: number, word: string): boolean {
  if (to - from !== word.length + 2) return false;
  for (let k = 0; k < word.length; k++) if (body[from + 1 + k] !== word.charCodeAt(k)) return false;
  return true;
}

/** The string value at `at`, or null when the value is not a string. */
function stringAt(body: Buffer, at: number): string | null {
  if (body[at] !== 0x22) return null;
  const end = stringEnd(body, at + 1);
  return end < 0 ? null : body.toString('latin1', at + 1, end - 1);
}

/**
 * The number and hash of the block in a whole answer, read without parsing it: the result's members are walked
 * until both are found (nodes write them before the transactions). null when the result is not an object.
 */
export function blockFields(body: Buffer): BlockFields | null {
  let start = -1;
  forEachTopMember(body, (from, to, value) => {
    if (!nameIs(body, from, to, 'result')) return true;
    start = value;
    return false;
  });
  if (start < 0 || body[start] !== 0x7b) return null;
  const block = body.subarray(start);
  const found: BlockFields = { number: undefined, hash: undefined };
  forEachTopMember(block, (from, to, value) => {
    if (nameIs(block, from, to, 'number')) found.number = stringAt(block, value);
    else if (nameIs(block, from, to, 'hash')) found.hash = stringAt(block, value);
    return found.number === undefined || found.hash === undefined;
  });
  return found;
}

/** The `result` of a whole answer (undefined for an error). */
function resultOf(body: Buffer): unknown {
  try {
    return (JSON.parse(body.toString()) as { result?: unknown }).result;
  } catch {
    return undefined;
  }
}

/** The params of a call, or an empty list. */
function paramsOf(paramsJson: string | null): unknown[] {
  if (paramsJson === null) return [];
  try {
    const params: unknown = JSON.parse(paramsJson);
    return Array.isArray(params) ? params : [];
  } catch {
    return [];
  }
}

/** What one answer of a call of `kind` with `params` shows. */
function findIn(known: KnownView, kind: AnswerCheckKind, params: unknown[], body: Buffer): Finding {
  switch (kind) {
    case 'block-by-number': {
      const tag = params[0];
      if (tag === 'pending') return PASS; // A pending block has no hash yet.
      const number = quantity(tag);
      return checkBlock(known, number === null ? {} : { number }, blockFields(body));
    }
    case 'block-by-hash':
      return typeof params[0] === 'string' ? checkBlock(known, { hash: params[0] }, blockFields(body)) : PASS;
    case 'logs': {
      const filter = params[0];
      return filter !== null && typeof filter === 'object' ? checkLogs(known, filter as Record<string, unknown>, resultOf(body)) : PASS;
    }
    case 'receipts':
      return checkReceipts(known, resultOf(body));
    default: {
      const unknownKind: never = kind;
      throw new Error(`unknown answer check ${String(unknownKind)}`);
    }
  }
}

/**
 * The checks of one call's answers, across its attempts (each on another node): made only for a checked
 * method, it remembers a failed claim and a suspect answer for the attempt after.
 */
export class AnswerCheck {
  private failedClaim: string | null = null;
  private suspect: { node: number; blocks: readonly number[] } | null = null;
  private params: unknown[] | null = null;

  constructor(
    private readonly chain: ChainAnswerChecks,
    readonly kind: AnswerCheckKind,
    private readonly paramsJson: string | null,
  ) {}

  /** The verdict on node `node`'s whole answer `body`; a failure is counted and logged here. */
  judge(body: Buffer, node: number): Verdict {
    this.params ??= paramsOf(this.paramsJson);
    return this.verdict(findIn(this.chain.known, this.kind, this.params, body), node);
  }

  /** The verdict on node `node`'s eth_getLogs answer `logs` (already parsed) for `filter`. */
  judgeLogs(filter: Record<string, unknown>, logs: unknown, node: number): Verdict {
    return this.verdict(checkLogs(this.chain.known, filter, logs), node);
  }

  private verdict(finding: Finding, node: number): Verdict {
    switch (finding.kind) {
      case 'fail':
        if (finding.claim === this.failedClaim) {
          this.chain.believed(node, finding.check);
          return 'pass';
        }
        this.failedClaim = finding.claim;
        this.chain.failed(node, finding.check);
        return 'fail';
      case 'suspect':
        if (this.suspect === null) {
          this.suspect = { node, blocks: finding.blocks };
          return 'suspect';
        }
        this.confirm(node, finding.withLogs);
        return 'pass';
      case 'pass':
        this.confirm(node, finding.withLogs);
        return 'pass';
      default: {
        const unknownFinding: never = finding;
        throw new Error(`unknown finding ${JSON.stringify(unknownFinding)}`);
      }
    }
  }

  /** Another node's answer holds logs of a block the suspect answer had none of: that node left them out. */
  private confirm(node: number, withLogs: ReadonlySet<number> | undefined): void {
    const suspect = this.suspect;
    if (suspect === null || withLogs === undefined || suspect.node === node) return;
    if (!suspect.blocks.some((b) => withLogs.has(b))) return;
    this.suspect = null;
    this.chain.failed(suspect.node, 'logs_bloom');
  }
}

/** What a chain's checks need of it. */
export interface AnswerChecksOptions {
  /** The chain's feeds (null without a ws upstream: then no block is known, and only asked numbers and hashes are checked). */
  feeds: Feeds | null;
  /** Each node's metrics, by index. */
  meters: readonly UpstreamMetrics[];
  /** Monotonic ms. */
  now: () => number;
  /** Where failures are logged (a warn when a node starts failing a check, then summaries); without it, nowhere. */
  log?: Logger;
}

/** One chain's answer checks (ChainRuntime.checks): the blocks it knows, and the counting of failures. */
export class ChainAnswerChecks {
  readonly known: KnownBlocks;
  private readonly repeated: RepeatedLog | null;

  constructor(
    private readonly config: ChainConfig,
    private readonly opts: AnswerChecksOptions,
  ) {
    this.known = new KnownBlocks(opts.feeds, opts.now);
    this.repeated = opts.log === undefined ? null : createRepeatedLog(opts.log);
  }

  /** The checks of one forwarded call of `row`, or null for a method whose answers are not checked (one field read). */
  forCall(row: MethodRow, paramsJson: string): AnswerCheck | null {
    const kind = row.answerCheck;
    if (kind === null) return null;
    this.known.listen();
    return new AnswerCheck(this, kind, paramsJson);
  }

  /** The checks of the eth_getLogs calls of one filter read (chain/filters.ts). */
  forLogs(): AnswerCheck {
    this.known.listen();
    return new AnswerCheck(this, 'logs', null);
  }

  /** Node `node` failed `check`: counted and logged (never the params). */
  failed(node: number, check: CheckName): void {
    this.opts.meters[node]?.checkFailed(check);
    const upstream = this.config.upstreams[node]?.name ?? String(node);
    this.repeated?.report(`${upstream} ${check}`, "upstream answers fail the gateway's checks", {
      chain: this.config.slug,
      upstream,
      check,
    });
  }

  /** A second node made the claim a first one failed `check` for: served, as the gateway's view may be late. */
  believed(node: number, check: CheckName): void {
    this.opts.log?.info("two nodes agree on an answer that fails the gateway's checks: served", {
      chain: this.config.slug,
      upstream: this.config.upstreams[node]?.name ?? String(node),
      check,
    });
  }

  close(): void {
    this.known.close();
    this.repeated?.close();
  }
}

/** A chain's answer checks, or null when it has none: a beacon chain, or `consistency.checks: false`. */
export function createAnswerChecks(config: ChainConfig, opts: AnswerChecksOptions): ChainAnswerChecks | null {
  if (config.kind !== 'evm' || !config.consistency.checks) return null;
  return new ChainAnswerChecks(config, opts);
}
