/**
 * The last RU of a balance across instances: block books of 2 and 3 instances over one store (a model of
 * PostgreSQL's reservations: each transaction applied whole at one moment, its answer back some turns
 * later), clients on each calling until refused. A balance of K calls serves exactly K calls, and what is
 * left is less than a call, whatever the blocks held when the balance ran low. Interleavings come from a
 * seeded generator, so a failure replays.
 */
import t from 'tap';
import { type BlockBook, type BlockSource, createBlockBook } from '../../src/metering/block-book.js';

/** A small seeded generator (mulberry32): the same turns on every run. */
function random(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return (((x ^ (x >>> 14)) >>> 0) % n) | 0;
  };
}

/** Lets `n` turns of the event loop pass (other instances, clients and answers go meanwhile). */
async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** One owner's balance and every instance's reservation of it, as the store keeps them. */
function fleetStore(balance: number, pick: (n: number) => number) {
  const state = { balance, held: new Map<string, number>(), transactions: 0 };
  const live = (): number => [...state.held.values()].reduce((n, ru) => n + ru, 0);
  const mine = (instance: string): number => state.held.get(instance) ?? 0;
  /** A transaction: sent, applied some turns later at one moment, answered some turns after that. */
  const transaction = async <R>(apply: () => R): Promise<R> => {
    await turns(pick(4));
    state.transactions++;
    const answer = apply();
    await turns(pick(4));
    return answer;
  };
  const sourceOf = (instance: string): BlockSource => ({
    reserve: (_ownerId, ru) =>
      transaction(() => {
        const granted = Math.max(0, Math.min(ru, state.balance - live()));
        state.held.set(instance, mine(instance) + granted);
        return granted;
      }),
    reserveCalls: (_ownerId, giveBack, calls) =>
      transaction(() => {
        state.held.set(instance, Math.max(0, mine(instance) - giveBack));
        let free = Math.max(0, state.balance - live());
        const granted = calls.map((ru) => {
          if (ru > free) return 0;
          free -= ru;
          return ru;
        });
        state.held.set(instance, mine(instance) + granted.reduce((n, ru) => n + ru, 0));
        return { granted, free, othersHeld: live() - mine(instance) };
      }),
    release: (_ownerId, ru) =>
      transaction(() => {
        state.held.set(instance, Math.max(0, mine(instance) - ru));
      }),
  });
  /** A flush: the instance's debits written, its reservation lowered by as much, in one transaction. */
  const write = (instance: string, book: BlockBook): void => {
    const ru = book.unwritten(1);
    if (ru === 0) return;
    state.balance -= ru;
    state.held.set(instance, Math.max(0, mine(instance) - ru));
    book.written(1, ru, undefined);
  };
  return { state, sourceOf, write };
}

interface Run {
  served: number;
  servedRu: number;
  balance: number;
}

/**
 * `instances` instances with `clients` clients each, calling owner 1 until refused; client c of instance i
 * pays costs(i, n) for its n-th call. Flushes every few turns, and once all is done.
 */
async function hammer(balance: number, instances: number, costs: (i: number, n: number) => number, seed: number): Promise<Run> {
  const pick = random(seed);
  const store = fleetStore(balance, pick);
  const books = Array.from({ length: instances }, (_, i) =>
    createBlockBook(store.sourceOf(`gw-${i}`), { blockRu: 100, validUntil: () => Infinity, now: () => 0 }),
  );
  const run: Run = { served: 0, servedRu: 0, balance };
  let done = false;
  const flusher = (async () => {
    while (!done) {
      await turns(1 + pick(6));
      for (const [i, book] of books.entries()) store.write(`gw-${i}`, book);
    }
  })();
  const client = async (i: number): Promise<void> => {
    const book = books[i]!;
    for (let n = 0; ; n++) {
      const ru = costs(i, n);
      const wait = book.prepare(1, ru);
      if (wait !== null) await wait;
      if (!book.reserve(1, ru)) return;
      await turns(pick(3));
      book.close(1, ru, ru);
      run.served++;
      run.servedRu += ru;
    }
  };
  await Promise.all(books.flatMap((_, i) => Array.from({ length: 8 }, () => client(i))));
  done = true;
  await flusher;
  for (const [i, book] of books.entries()) store.write(`gw-${i}`, book);
  run.balance = store.state.balance;
  return run;
}

const COST = 15;
const K = 100;

for (const instances of [2, 3]) {
  t.test(`${instances} instances: a balance of K calls serves exactly K, whatever K`, async (t) => {
    // 1 call; K − 1 calls and some RU short of one more; K calls exactly; a balance under one block.
    const cases = [
      { balance: COST, calls: 1 },
      { balance: (K - 1) * COST + 7, calls: K - 1 },
      { balance: K * COST, calls: K },
      { balance: 6 * COST, calls: 6 },
    ];
    for (const [n, c] of cases.entries()) {
      for (const seed of [1, 2, 3]) {
        const run = await hammer(c.balance, instances, () => COST, seed * 10 + n);
        t.equal(run.served, c.calls, `balance ${c.balance}, seed ${seed}: ${run.served} calls served`);
        t.equal(run.balance, c.balance - run.servedRu, 'every call served was charged once');
        t.ok(run.balance >= 0 && run.balance < COST, `the balance ends at ${run.balance}, in [0, ${COST})`);
      }
    }
  });

  t.test(`${instances} instances: uneven costs never overdraw, and leave less than the dearest call`, async (t) => {
    const prices = [7, 15, 23];
    for (const seed of [4, 5, 6]) {
      const run = await hammer(1000, instances, (i, n) => prices[(i + n) % prices.length]!, seed);
      t.equal(run.balance, 1000 - run.servedRu, `${run.served} calls, ${run.servedRu} RU, charged once`);
      t.ok(run.balance >= 0 && run.balance < 23, `the balance ends at ${run.balance}, in [0, 23)`);
    }
  });
}
