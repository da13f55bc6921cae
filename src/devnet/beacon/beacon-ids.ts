/**
 * block_id, state_id and validator_id as the Beacon API defines them. A malformed id is 400; a
 * well-formed id naming nothing (a future slot, an unknown root) is 404.
 */
import type { BeaconChain } from './beacon-chain.js';
import { found, missing, parseHex, type Found } from './beacon-reply.js';
import type { ChainView, SlotBlock } from './chain-view.js';
import type { Epochs } from './epochs.js';
import type { ValidatorSet } from './validator-set.js';

/** What every route reads from: the followed chain, its sealed beacon chain, epoch arithmetic, the validators, anvil's chain id. */
export interface BeaconContext {
  readonly view: ChainView;
  readonly chain: BeaconChain;
  readonly epochs: Epochs;
  readonly validators: ValidatorSet;
  readonly chainId: number;
}

/** `execution_optimistic` and `finalized` for data at `slot`: never optimistic, finalized at or below the finalized checkpoint. */
export function chainMeta(ctx: BeaconContext, slot: number): { execution_optimistic: false; finalized: boolean } {
  const { epochs, view } = ctx;
  return { execution_optimistic: false, finalized: slot <= epochs.startSlot(epochs.finalizedEpoch(view.head().slot)) };
}

async function bySlot(ctx: BeaconContext, slot: number, what: string): Promise<Found<SlotBlock>> {
  const b = await ctx.view.blockAt(slot);
  return b ? found(b) : missing(404, `${what} not found: slot ${slot}`);
}

async function resolveNamed(ctx: BeaconContext, id: string, what: string): Promise<Found<SlotBlock> | undefined> {
  const { view, epochs } = ctx;
  const headSlot = view.head().slot;
  switch (id) {
    case 'head':
      return found(view.head());
    case 'genesis':
      return found(view.genesis());
    case 'finalized':
      return bySlot(ctx, epochs.startSlot(epochs.finalizedEpoch(headSlot)), what);
    default:
      if (/^\d+$/.test(id)) return id.length > 15 ? missing(404, `${what} not found: slot ${id}`) : bySlot(ctx, Number(id), what);
      return undefined;
  }
}

/** head, genesis, finalized, a decimal slot or a 0x block root. */
export async function resolveBlockId(ctx: BeaconContext, id: string): Promise<Found<SlotBlock>> {
  const named = await resolveNamed(ctx, id, 'block');
  if (named) return named;
  const root = parseHex(id, 32);
  if (!root) return missing(400, `invalid block id: ${id}`);
  const b = await ctx.view.blockByRoot(root);
  return b ? found(b) : missing(404, `block not found: ${root}`);
}

/** head, genesis, finalized, justified, a decimal slot or a 0x state root. */
export async function resolveStateId(ctx: BeaconContext, id: string): Promise<Found<SlotBlock>> {
  if (id === 'justified') {
    const { epochs, view } = ctx;
    return bySlot(ctx, epochs.startSlot(epochs.justifiedEpoch(view.head().slot)), 'state');
  }
  const named = await resolveNamed(ctx, id, 'state');
  if (named) return named;
  const root = parseHex(id, 32);
  if (!root) return missing(400, `invalid state id: ${id}`);
  const slot = ctx.view.slotOfStateRoot(root);
  const b = slot === undefined ? undefined : await ctx.view.blockAt(slot);
  return b ? found(b) : missing(404, `state not found: ${root}`);
}

/**
 * Validator ids (decimal indices or 0x pubkeys) to indices. Malformed ids are 400; well-formed ones
 * naming no validator are left out, as the API asks of list queries.
 */
export function resolveValidatorIds(set: ValidatorSet, ids: readonly string[]): Found<number[]> {
  const out: number[] = [];
  for (const id of ids) {
    if (/^\d+$/.test(id)) {
      const index = Number(id);
      if (id.length <= 15 && index < set.count) out.push(index);
      continue;
    }
    const pubkey = parseHex(id, 48);
    if (!pubkey) return missing(400, `invalid validator id: ${id}`);
    const index = set.indexOf(pubkey);
    if (index !== undefined) out.push(index);
  }
  return found([...new Set(out)]);
}
