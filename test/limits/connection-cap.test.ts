import t from 'tap';
import { Worker } from 'node:worker_threads';
import { createConnectionCap } from '../../src/limits/connection-cap.js';

t.test('a cap of three: three held, the fourth refused, a release gives a place back', async (t) => {
  const cap = createConnectionCap(3);
  t.equal(cap.max, 3);
  t.equal(cap.refusal(), null);
  for (let i = 0; i < 3; i++) t.equal(cap.tryHold(), null, `place ${i + 1}`);
  t.equal(cap.tryHold(), 'max_connections');
  t.equal(cap.refusal(), 'max_connections', 'a plain request is refused while full');
  t.equal(cap.held(), 3, 'a refused hold takes nothing');
  cap.release();
  t.equal(cap.refusal(), null);
  t.equal(cap.tryHold(), null);
  cap.hold();
  t.equal(cap.held(), 4, 'hold() is unchecked (a stream its request let in)');
});

t.test('short of descriptors: everything refused for that reason until it clears', async (t) => {
  const cap = createConnectionCap(10);
  cap.setShort(true);
  t.equal(cap.refusal(), 'file_descriptors');
  t.equal(cap.tryHold(), 'file_descriptors');
  t.equal(cap.held(), 0);
  cap.setShort(false);
  t.equal(cap.tryHold(), null);
});

t.test('one count for every thread: a view made from the memory reads the same cap and places', async (t) => {
  const main = createConnectionCap(100);
  const view = createConnectionCap(0, main.memory);
  t.equal(view.max, 100, 'the max is read from the memory, not given');
  view.tryHold();
  t.equal(main.held(), 1);
  main.setShort(true);
  t.equal(view.refusal(), 'file_descriptors');
  main.setShort(false);
  main.release();
  // Two threads taking places at once never pass the cap together.
  const source = `
    const { workerData, parentPort } = require('node:worker_threads');
    const cells = new Int32Array(workerData);
    let got = 0;
    for (let i = 0; i < 5000; i++) {
      if (Atomics.add(cells, 0, 1) < Atomics.load(cells, 2)) got++;
      else Atomics.sub(cells, 0, 1);
    }
    parentPort.postMessage(got);
  `;
  const racers = [0, 1].map(
    () =>
      new Promise<number>((resolve, reject) => {
        const w = new Worker(source, { eval: true, workerData: main.memory });
        w.once('message', resolve);
        w.once('error', reject);
      }),
  );
  let mine = 0;
  for (let i = 0; i < 5000; i++) if (main.tryHold() === null) mine++;
  const total = mine + (await Promise.all(racers)).reduce((a, b) => a + b, 0);
  t.equal(total, 100, 'exactly the cap taken, over three threads');
  t.equal(main.held(), 100);
});
