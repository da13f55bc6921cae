/**
 * State reads: calls whose answer needs the state of one block (balances, code, storage, nonces, calls
 * and simulations at that block). A full node keeps the state of its last blocks only (128 on geth), so a
 * state read about an older block needs an archive node (chain/node-routes.ts). Which methods are state
 * reads, and where their block reference sits, is a trait of the catalogue row (MethodRow.stateBlockAt).
 */
import { methodRow } from './methods.js';
import { isHash, isPlainObject, isQuantity } from './param-types.js';

/** Whether `method` is a state read (its catalogue row's stateBlockAt). */
export function isStateRead(method: string): boolean {
  return (methodRow(method)?.stateBlockAt ?? null) !== null;
}

/**
 * The block a state read is about: its number, or its hash (a string) when the call names it by hash;
 * null when it is about a moving tag (`latest`, `pending`, `safe`, `finalized`, an omitted block), which is
 * recent by definition, and for a method that is not a state read. `earliest` is block 0. A block
 * reference is a number, a tag, a 32-byte hash or an EIP-1898 object (`blockNumber` or `blockHash`); the
 * params were checked already, so anything else reads as recent.
 */
export function stateBlockOf(method: string, params: readonly unknown[]): number | string | null {
  const at = methodRow(method)?.stateBlockAt ?? null;
  if (at === null) return null;
  const ref = params[at];
  // A 32-byte hash also reads as a quantity; nodes take a 66-character reference for a hash.
  if (isHash(ref)) return ref;
  if (isQuantity(ref)) return Number(ref);
  if (ref === 'earliest') return 0;
  if (isPlainObject(ref)) {
    if (isHash(ref.blockHash)) return ref.blockHash;
    if (isQuantity(ref.blockNumber)) return Number(ref.blockNumber);
    if (ref.blockNumber === 'earliest') return 0;
  }
  return null;
}
