/**
 * The transaction pool's views (geth's `txpool_*`, also served by Erigon, Nethermind, Reth and
 * anvil). Each answer is the pool of whichever node served the call; pools differ a little from node
 * to node. txpool_content can run to megabytes on a busy chain, so it costs more than a read (and pays
 * per started MiB of answer besides); txpool_inspect is its summary.
 */
import { ADDRESS, type MethodRule, NONE } from './method-rule.js';

export const TXPOOL_METHODS: ReadonlyArray<readonly [string, MethodRule]> = [
  ['txpool_status', { params: NONE }],
  ['txpool_inspect', { ru: 50, params: NONE }],
  // The whole mempool, pending and queued, with every transaction in full: heavy (see MethodRule.heavy).
  ['txpool_content', { ru: 100, heavy: true, params: NONE }],
  ['txpool_contentFrom', { ru: 20, params: [ADDRESS] }],
];
