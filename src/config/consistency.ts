/**
 * A chain's consistency across its nodes (config chains.<slug>.consistency, evm only): which head the gateway
 * serves, whether block tags are rewritten to it, which methods are asked of several nodes and compared, and
 * whether answers are checked against the blocks the gateway knows. The schema declares each key once; the
 * rules across keys (a quorum no chain of this size can reach) are checkConsistency's. See docs/consistency.md.
 */
import type { Static } from './typebox.js';
import type { Errors } from './checks.js';
import { bool, int, oneOf, optionalInt, section, stringList } from './keys.js';
import { checkPatterns } from './method-policy.js';

export const QuorumSchema = section(
  {
    methods: stringList(
      [],
      'Patterns of the methods asked of several nodes at once and answered when enough agree (e.g. [eth_getBalance, eth_call]); never a write nor eth_blockNumber; default none.',
      "must be a list of method names or prefixes ending in '*' (e.g. [eth_getBalance, eth_call])",
    ),
    nodes: int(2, 16, 3, 'Nodes in rotation asked for each such call (fewer when fewer are in rotation).'),
    agree: int(1, 16, 2, 'Answers that must be equal (as canonical JSON) for the call to be answered; at most nodes.'),
    on_mismatch: oneOf(
      ['majority', 'error'] as const,
      'majority',
      'Without `agree` equal answers: serve the answer most nodes gave when one has more than any other (majority), or answer an error (error).',
    ),
    eject_after: int(
      1,
      1000,
      3,
      'Disagreements in a row (against an agreed answer) after which a node leaves rotation until its next good probe.',
    ),
  },
  'Methods answered only when several nodes agree (for chains mixing own nodes with a provider).',
);

export const ConsistencySchema = section(
  {
    min_nodes: optionalInt(
      1,
      1000,
      'Nodes in rotation that must have reached a block before the chain serves it as its head; default a majority of the nodes in rotation (at least 1).',
    ),
    rewrite_tags: bool(
      false,
      'Rewrite latest (and an omitted block) to the served head number before forwarding, so every node answers about the same block.',
    ),
    checks: bool(
      true,
      "Check answers against the blocks the gateway knows (a block's number and hash, logs against the bloom, receipts against the canonical block); a failed check is a node failure, retried elsewhere.",
    ),
    quorum: QuorumSchema,
  },
  'How the chain stays one chain across its nodes (evm only): the served head, tag rules, quorum, answer checks.',
);

export type ConsistencyConfig = Static<typeof ConsistencySchema>;
export type QuorumConfig = Static<typeof QuorumSchema>;

/** The rules across a chain's consistency keys, each error naming its key path. */
export function checkConsistency(c: ConsistencyConfig, upstreamCount: number, path: string, errors: Errors): void {
  checkPatterns(c.quorum.methods, `${path}.quorum.methods`, errors);
  if (c.quorum.agree > c.quorum.nodes)
    errors.push(`${path}.quorum.agree: ${c.quorum.agree} is more than quorum.nodes (${c.quorum.nodes}); at most nodes can agree`);
  if (c.quorum.methods.length > 0 && c.quorum.nodes > upstreamCount)
    errors.push(`${path}.quorum.nodes: ${c.quorum.nodes} is more than the chain's ${upstreamCount} upstream(s)`);
  if (c.min_nodes !== undefined && c.min_nodes > upstreamCount)
    errors.push(`${path}.min_nodes: ${c.min_nodes} is more than the chain's ${upstreamCount} upstream(s); no head could ever be served`);
}
