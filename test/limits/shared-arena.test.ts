// The buddy arena the shared limiter's logs grow into: blocks never overlap, freed twins merge back, a full
// arena takes blocks back from idle holders it is allowed to, and a wrong free changes nothing.
import t from 'tap';
import { arenaFloats, arenaInts, arenaUnits, initArena, openArena, UNIT_ENTRIES } from '../../src/limits/shared-arena.js';
import { allocateTable, FIRST_SLOT_INT, KIND_LOCK, openTable, releaseLocksHeldBy } from '../../src/limits/shared-table.js';
import { seeded } from '../support/seeded.js';

const KIND = 0x7465_7374;

function makeArena(entries: number, takeBack: (holder: number, block: number) => boolean = () => false) {
  const units = arenaUnits(entries);
  const memory = allocateTable({
    kind: KIND,
    slots: 64,
    intsPerSlot: FIRST_SLOT_INT,
    floatsPerSlot: 0,
    extraInts: arenaInts(units),
    extraFloats: arenaFloats(units),
  });
  const table = openTable(memory, KIND, { isIdle: () => false, reset: () => {}, now: () => 0 }, 'test');
  initArena(table.ints, table.extraIntsAt, units);
  return { units, memory, ints: table.ints, arena: openArena(table, takeBack) };
}

t.test('blocks never overlap, and freeing everything merges back to whole top blocks', async (t) => {
  const { units, arena } = makeArena(4 * 128);
  t.equal(units, 64, '4 top blocks of 16 units');
  const rng = seeded(5);
  const held = new Map<number, { order: number; slot: number }>();
  let refusals = 0;
  for (let step = 0; step < 20_000; step++) {
    if (held.size > 0 && rng() < 0.45) {
      const blocks = [...held.keys()];
      const block = blocks[Math.floor(rng() * blocks.length)]!;
      arena.free(block, held.get(block)!.slot);
      held.delete(block);
      continue;
    }
    const order = Math.floor(rng() * 5);
    const slot = Math.floor(rng() * 64);
    const block = arena.allocate(order, slot);
    if (block < 0) {
      refusals++;
      continue;
    }
    if (block % (1 << order) !== 0) t.fail(`block ${block} of order ${order} is not aligned to its size`);
    for (const [other, h] of held) {
      if (block < other + (1 << h.order) && other < block + (1 << order)) t.fail(`block ${block} overlaps ${other}`);
    }
    held.set(block, { order, slot });
  }
  t.ok(refusals > 0, `the arena was run full (${refusals} refusals)`);
  for (const [block, h] of held) arena.free(block, h.slot);
  const tops = [1, 2, 3, 4, 5].map(() => arena.allocate(4, 0));
  t.same(
    tops.slice(0, 4).sort((a, b) => a - b),
    [0, 16, 32, 48],
    'all four top blocks whole again',
  );
  t.equal(tops[4], -1, 'and no fifth');
  t.equal(arena.floatsOf(16) - arena.floatsOf(0), 16 * 2 * UNIT_ENTRIES, 'a unit is UNIT_ENTRIES (time, units) pairs');
});

t.test('a free by a slot that does not hold the block changes nothing', async (t) => {
  const { arena } = makeArena(128);
  const block = arena.allocate(4, 7);
  t.equal(block, 0);
  arena.free(block, 8);
  t.equal(arena.allocate(0, 9), -1, 'still held by slot 7');
  arena.free(block, 7);
  t.equal(arena.allocate(0, 9), 0, 'freed by its holder');
});

t.test('a full arena takes back a block whose holder agrees, and asks no one for its own', async (t) => {
  const asked: Array<[number, number]> = [];
  let agree = false;
  const { arena } = makeArena(128, (holder, block) => {
    asked.push([holder, block]);
    return agree;
  });
  t.equal(arena.allocate(3, 1), 0);
  t.equal(arena.allocate(3, 2), 8);
  t.equal(arena.allocate(0, 1), -1, 'full, and the holders keep their blocks');
  t.same(asked, [[2, 8]], 'slot 1 was not asked about its own block');
  agree = true;
  t.equal(arena.allocate(1, 1), 8, 'slot 2 let its block go: split for the new one');
  t.equal(arena.allocate(1, 3), 10, 'its other half is free');
  t.equal(arena.allocate(0, 3), 12);
});

t.test('a thread that died holding the arena lock puts the arena out of use, not its blocks in two logs', async (t) => {
  const { memory, ints, arena } = makeArena(128);
  t.equal(arena.allocate(0, 1), 0, 'in use before');
  // The lock word of a thread (id 4242) that died holding it: its id + 1, shifted left.
  ints[KIND_LOCK] = (4242 + 1) * 2;
  t.equal(releaseLocksHeldBy(memory, 4242), 1);
  t.equal(arena.allocate(0, 2), -1, 'no block after the lock is found damaged');
  t.equal(arena.allocate(4, 2), -1, 'nor later');
  arena.free(0, 1);
  t.equal(arena.allocate(0, 3), -1, 'and a free does not bring it back');
});
