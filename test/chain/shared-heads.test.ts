/**
 * The served head shared by every thread (chain/shared-heads.ts): a chain's cell is found in the same place by
 * every thread whatever order its chains are made in; and two served-head trackers over one cell (two threads
 * hearing the same reports a moment apart) answer one head that never goes back from one to the other.
 */
import t from 'tap';
import { createServedHead, type ServedHeadTracker } from '../../src/chain/served-head.js';
import { createSharedHeads, type HeadCell } from '../../src/chain/shared-heads.js';
import { createChainHealth, type ChainHealth } from '../../src/upstreams/selection.js';

t.test('a slug finds its cell wherever the memory is read, in any order of making', async (t) => {
  const main = createSharedHeads();
  const worker = createSharedHeads(main.memory);
  const mainA = main.cell('mainnet')!;
  const mainB = main.cell('sepolia')!;
  const workerB = worker.cell('sepolia')!;
  const workerA = worker.cell('mainnet')!;
  t.equal(mainA.load(), null, 'no head at first');
  mainA.raise(10);
  t.equal(workerA.load(), 10, 'a head raised on one thread is read on the other');
  t.equal(workerB.load(), null, "another chain's cell is its own");
  workerB.raise(7);
  t.equal(mainB.load(), 7);
  mainA.raise(9);
  t.equal(workerA.load(), 10, 'raise never lowers');
  mainA.store(4);
  t.equal(workerA.load(), 4, 'store lowers (every node went back)');
  mainA.store(null);
  t.equal(workerA.load(), null, 'and forgets (a chain made anew)');
});

t.test('past 256 chains a chain gets no cell, and the ones before keep theirs', async (t) => {
  const heads = createSharedHeads();
  const cells = Array.from({ length: 256 }, (_, i) => heads.cell(`chain-${i}`));
  t.ok(
    cells.every((c) => c !== null),
    '256 chains fit',
  );
  t.equal(heads.cell('chain-256'), null, 'the 257th has none (its threads serve their own heads)');
  cells[3]!.raise(33);
  t.equal(heads.cell('chain-3')!.load(), 33, 'a slug asked again finds its cell');
  t.equal(createSharedHeads(heads.memory).cell('chain-3')!.load(), 33, 'on another thread too');
});

interface Thread {
  health: ChainHealth;
  served: ServedHeadTracker;
  heads(...heads: number[]): void;
}

/** One thread's copy of a three-node chain, its served head in `cell`. */
function threadOf(cell: HeadCell, fresh: boolean): Thread {
  let served: ServedHeadTracker | null = null;
  const health = createChainHealth(['a', 'b', 'c'], { maxLagBlocks: 5, now: () => 1_000, onHeads: () => served?.update() });
  served = createServedHead(health, { shared: cell, fresh });
  return {
    health,
    served,
    heads(...heads) {
      for (const [i, h] of heads.entries()) health.upstreams[i]!.reportHead(h);
    },
  };
}

t.test('two threads over one cell answer one head, which goes back only when every node did', async (t) => {
  const memory = createSharedHeads();
  const main = threadOf(memory.cell('devnet')!, true);
  const worker = threadOf(createSharedHeads(memory.memory).cell('devnet')!, false);
  main.heads(10, 10, 11);
  worker.heads(10, 10, 11);
  t.equal(main.served.now(), 10);
  t.equal(worker.served.now(), 10);
  // The main thread hears the next reports first.
  main.heads(12, 12, 13);
  t.equal(main.served.now(), 12);
  t.equal(worker.served.now(), 12, 'the worker answers the head the main thread served, before the reports reach it');
  worker.heads(11, 11, 12);
  t.equal(worker.served.now(), 12, 'and a late report there does not take it back');
  worker.heads(12, 12, 13);
  t.equal(worker.served.now(), 12);
  // A head the worker served first (a forwarded eth_blockNumber there) is not taken back by the main thread,
  // whose reports have not reached it: that is no sign that every node went back.
  worker.heads(14, 14, 14);
  t.equal(main.served.now(), 14);
  main.heads(13, 13, 13);
  t.equal(main.served.now(), 14, "the main thread's own head was 12: the nodes are not below it");
  t.equal(main.served.now(), 14);
  // Every node goes back (a reset): the thread that hears it first lowers the shared head; the other follows
  // when the reports reach it.
  main.heads(2, 2, 2);
  t.equal(main.served.now(), 2, 'every node is below the head the main thread served: it follows them down');
  t.equal(worker.served.now(), 14, 'the worker answers its own head until it hears the reset');
  worker.heads(2, 2, 2);
  t.equal(worker.served.now(), 2);
  worker.heads(3, 3, 3);
  t.equal(main.served.now(), 3, 'and from there the head climbs again for both');
});

t.test('the main thread forgets the shared head when it makes the chain anew', async (t) => {
  const memory = createSharedHeads();
  const cell = memory.cell('devnet')!;
  cell.raise(500);
  const again = threadOf(cell, true);
  t.equal(again.served.now(), null, 'a head served before a reload says nothing of the chain now configured');
  again.heads(3, 3, 3);
  t.equal(again.served.now(), 3);
});
