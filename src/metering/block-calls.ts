// An owner that is low reserves call by call: the calls waiting go to the store together (`reserveCalls`),
// each set aside whole or refused, and what is held with no call waiting goes back (see BlockBook).
import type { ReservedBlocks } from './block-book.js';
import { type Block, feedsHere, granted, spendable, type WaitingCall } from './owner-block.js';

const sumOf = (ru: readonly number[]): number => ru.reduce((n, r) => n + r, 0);

/** Low: the call waits for the next `reserveCalls`, which sets its RU aside whole or refuses it (402). */
export function viaCall(book: ReservedBlocks, ownerId: number, b: Block, ru: number): Promise<void> {
  return new Promise((resolve, reject) => {
    b.queue.push({ ru, resolve, reject });
    b.waiting += ru;
    askSoon(book, ownerId, b);
  });
}

/**
 * On the next turn, so that calls arriving meanwhile go in the same transaction, and the calls an answer
 * just granted have reserved their RU before the rest is given back.
 */
function askSoon(book: ReservedBlocks, ownerId: number, b: Block): void {
  if (b.asking) return;
  b.asking = true;
  setImmediate(() => askCalls(book, ownerId, b));
}

function askCalls(book: ReservedBlocks, ownerId: number, b: Block): void {
  const calls = b.queue.splice(0);
  const asked = calls.map((c) => c.ru);
  // What is held with no call waiting for it goes back first: the store then sees it, for this instance's calls or another's.
  const giveBack = feedsHere(book, b) ? 0 : Math.max(0, spendable(book, ownerId, b) - (b.waiting - sumOf(asked)));
  const stale = book.now() >= book.options.validUntil(ownerId);
  b.held -= giveBack;
  b.writtenMeanwhile = 0;
  const answered = (end: (c: WaitingCall) => void): void => {
    b.asking = false;
    for (const c of calls) {
      b.waiting -= c.ru;
      end(c);
    }
    if (b.queue.length > 0) askSoon(book, ownerId, b);
    else giveBackSoon(book, ownerId, b);
  };
  book.source.reserveCalls(ownerId, giveBack, asked).then(
    (answer) => {
      granted(book, b, stale, sumOf(answer.granted));
      b.low = answer.free < book.options.blockRu;
      b.ceiling = answer.othersHeld === 0 ? answer.free : Number.POSITIVE_INFINITY;
      b.ceilingAt = book.now();
      answered((c) => c.resolve());
    },
    (err: unknown) => answered((c) => c.reject(err)),
  );
}

/** Low: on the next turn, what is held with no call waiting for it goes back to the store. */
export function giveBackSoon(book: ReservedBlocks, ownerId: number, b: Block): void {
  if (!b.low || b.givingBack || feedsHere(book, b)) return;
  b.givingBack = true;
  setImmediate(() => {
    b.givingBack = false;
    // Dropped meanwhile: the caller of `drop` gives its RU back; releasing them here too would free them twice.
    if (book.blocks.get(ownerId) !== b) return;
    // Calls waiting: their `reserveCalls` gives it back. A refill in flight: its answer decides.
    if (!b.low || b.asking || b.refill !== null || b.waiting > 0) return;
    const ru = spendable(book, ownerId, b);
    if (ru <= 0) return;
    b.held -= ru;
    // The store has more left than it last said.
    b.ceilingAt = Number.NEGATIVE_INFINITY;
    // Failed: the store keeps them for this instance until a clean stop or their expiry; never spent twice.
    book.source.release(ownerId, ru).catch(() => {});
  });
}
