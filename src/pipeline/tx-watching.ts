/**
 * Whether a transaction sent with eth_sendRawTransaction is watched (chain/tx-watch.ts), decided as the call is
 * planned, where its caller is known: a key's always, the public path's only with transactions.watch_keyless.
 * The watch starts once a node accepted it (shared-call.ts hands the hash an answer carried), per the caller's limit
 * key (its bounds' unit), through the chain's filters, which reach the main thread's watch from a worker.
 */
import type { ChainRuntime } from '../chain/runtime.js';
import { WATCH_CALL } from '../chain/tx-watch.js';
import type { Caller } from './admission.js';
import type { GatewayContext } from './context.js';

/** What to run with the accepted transaction's hash, or null when it is not watched. */
export function sentTransactionWatch(
  ctx: GatewayContext,
  chain: ChainRuntime,
  caller: Caller,
  params: unknown[],
): ((hash: string) => void) | null {
  const bounds = ctx.config.transactions;
  if (bounds.max_watched === 0 || (caller.auth === null && !bounds.watch_keyless)) return null;
  const raw = params[0];
  if (typeof raw !== 'string') return null;
  return (hash) => {
    // A watch that cannot start (the gateway stopping) costs the sender nothing: its answer is already given.
    chain.filters.call(caller.limitKey, WATCH_CALL, [raw, hash]).catch(() => {});
  };
}
