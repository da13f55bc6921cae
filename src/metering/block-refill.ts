// Blocks of RU reserved from the store while an owner is not low: a call that finds too little waits for a
// refill (`viaBlock`), and a background refill keeps a steady stream of calls from waiting (`topUpSoon`).
import type { ReservedBlocks } from './block-book.js';
import { viaCall } from './block-calls.js';
import { type Block, feedsHere, granted, spendable } from './owner-block.js';

export function refill(book: ReservedBlocks, ownerId: number, b: Block, atLeast: number): Promise<void> {
  if (b.refill !== null) return b.refill;
  const want = Math.max(book.options.blockRu, atLeast);
  const stale = book.now() >= book.options.validUntil(ownerId);
  b.writtenMeanwhile = 0;
  b.refill = book.source.reserve(ownerId, want).then(
    (ru) => {
      b.refill = null;
      granted(book, b, stale, ru);
      if (ru === 0) b.dryAt = book.now();
      // Less than asked: the owner's balance is nearly spent (or held elsewhere); a block would strand it.
      b.low = ru < want;
    },
    (err: unknown) => {
      b.refill = null;
      throw err;
    },
  );
  return b.refill;
}

/**
 * Refills until what may be spent covers every call waiting, or the store gave less than asked (it has no
 * more): a burst of calls that all wait on one refill too small for them asks again, rather than being
 * refused 402 while the shared balance still holds RU.
 */
async function fill(book: ReservedBlocks, ownerId: number, b: Block): Promise<void> {
  for (;;) {
    const before = spendable(book, ownerId, b);
    const missing = b.waiting - before;
    if (missing <= 0) return;
    await refill(book, ownerId, b, missing);
    // Low: call by call from now on. No gain: the RU are not spendable yet (renewals failing), asking again would not help.
    if (b.low || spendable(book, ownerId, b) <= before) return;
  }
}

export async function viaBlock(book: ReservedBlocks, ownerId: number, b: Block, ru: number): Promise<void> {
  b.waiting += ru;
  try {
    await fill(book, ownerId, b);
  } finally {
    b.waiting -= ru;
  }
  // The store had less than asked: every call that waited is asked for on its own, what the short
  // block brought given back in the same transaction (the calls would otherwise race for it here).
  if (b.low) await viaCall(book, ownerId, b, ru);
}

/**
 * A background refill once the owner holds less than half a block (when low, only for deliveries charged
 * here); its failure waits for the next call, a refill that got nothing for dryRetryMs.
 */
export function topUpSoon(book: ReservedBlocks, ownerId: number, b: Block): void {
  if (b.low && !feedsHere(book, b)) return;
  if (b.refill === null && spendable(book, ownerId, b) < book.options.blockRu / 2 && book.now() - b.dryAt >= book.dryRetryMs)
    refill(book, ownerId, b, 0).catch(() => {});
}
