/** The usage rows waiting to be written: one row per endpoint, method, minute and status, whatever the order of the counts. */
import t from 'tap';
import { createPendingUsage } from '../../src/metering/usage-rows.js';

const MINUTE = 60_000;

type Row = { endpointId: string; method: string; t: number; status: number };
const keyOf = (r: Row): string => `${r.endpointId} ${r.method} ${r.t} ${r.status}`;
const sorted = <R extends Row>(rows: R[]): R[] => rows.sort((a, b) => keyOf(a).localeCompare(keyOf(b)));

t.test('counts add up per endpoint, method, minute and status, in runs or interleaved', async (t) => {
  const usage = createPendingUsage();
  usage.count(1, 'ep1', 'eth_call', 0, 5 * MINUTE + 1, 1, 10);
  usage.count(1, 'ep1', 'eth_call', 0, 5 * MINUTE + 2, 1, 10);
  usage.count(1, 'ep1', 'eth_call', 429, 5 * MINUTE + 3, 1, 0);
  usage.count(1, 'ep1', 'eth_call', 0, 5 * MINUTE + 4, 1, 10);
  usage.count(1, 'ep1', 'eth_getBalance', 0, 5 * MINUTE + 5, 1, 15);
  usage.count(2, 'ep2', 'eth_call', 0, 5 * MINUTE + 6, 1, 10);
  usage.count(1, 'ep1', 'eth_call', 0, 6 * MINUTE, 2, 20);
  usage.count(1, 'ep1', 'eth_call', 0, 5 * MINUTE + 7, 1, 10);
  // In no particular order: rows are kept by endpoint first.
  t.same(
    sorted([...usage.rows()].map((r) => ({ ...r }))),
    sorted([
      { endpointId: 'ep1', ownerId: 1, method: 'eth_call', t: 300, status: 0, requests: 4, ru: 40 },
      { endpointId: 'ep1', ownerId: 1, method: 'eth_call', t: 300, status: 429, requests: 1, ru: 0 },
      { endpointId: 'ep1', ownerId: 1, method: 'eth_getBalance', t: 300, status: 0, requests: 1, ru: 15 },
      { endpointId: 'ep2', ownerId: 2, method: 'eth_call', t: 300, status: 0, requests: 1, ru: 10 },
      { endpointId: 'ep1', ownerId: 1, method: 'eth_call', t: 360, status: 0, requests: 2, ru: 20 },
    ]),
  );
  t.equal(usage.size, 5);
  t.equal(usage.ru, 85);
});

t.test('rows handed over are never counted into again', async (t) => {
  const usage = createPendingUsage();
  usage.count(1, 'ep1', 'eth_call', 0, MINUTE, 1, 10);
  const shipped = usage.take();
  usage.count(1, 'ep1', 'eth_call', 0, MINUTE, 1, 10);
  t.same(
    shipped,
    [{ endpointId: 'ep1', ownerId: 1, method: 'eth_call', t: 60, status: 0, requests: 1, ru: 10 }],
    'the shipment stays as taken',
  );
  t.same([...usage.rows()], [{ endpointId: 'ep1', ownerId: 1, method: 'eth_call', t: 60, status: 0, requests: 1, ru: 10 }]);
  const written = [...usage.rows()];
  usage.clear();
  usage.count(1, 'ep1', 'eth_call', 0, MINUTE, 1, 10);
  t.equal(written[0]!.requests, 1, 'nor are rows written and cleared');
  t.equal(usage.ru, 10);
});

t.test("a shipment carries every row to the writer's pending usage, added to the rows of the same key", async (t) => {
  const worker = createPendingUsage();
  worker.count(1, 'ep_a', 'eth_call', 0, 60_500, 1, 20);
  worker.count(1, 'ep_a', 'eth_call', 0, 61_000, 1, 20);
  worker.count(2, 'ep_b', 'eth_getBalance', 429, 120_000, 1, 0);
  const shipment = worker.takeShipment();
  t.equal(worker.size, 0, 'the worker starts empty');
  t.equal(worker.ru, 0);
  t.same(shipment, ['ep_a', 1, 'eth_call', 60, 0, 2, 40, 'ep_b', 2, 'eth_getBalance', 120, 429, 1, 0]);

  const writer = createPendingUsage();
  writer.count(1, 'ep_a', 'eth_call', 0, 90_000, 3, 60);
  writer.absorbShipment(structuredClone(shipment));
  t.equal(writer.ru, 100);
  t.same(
    [...writer.rows()],
    [
      { endpointId: 'ep_a', ownerId: 1, method: 'eth_call', t: 60, status: 0, requests: 5, ru: 100 },
      { endpointId: 'ep_b', ownerId: 2, method: 'eth_getBalance', t: 120, status: 429, requests: 1, ru: 0 },
    ],
  );
  t.same(worker.takeShipment(), [], 'nothing counted: an empty shipment');
});

t.test('a count after a shipment goes to the next shipment, never into a row already shipped', async (t) => {
  const worker = createPendingUsage();
  worker.count(1, 'ep_a', 'eth_call', 0, 60_000, 1, 20);
  t.same(worker.takeShipment(), ['ep_a', 1, 'eth_call', 60, 0, 1, 20]);
  // The same key as the last count: the run's remembered row must not outlive the shipment.
  worker.count(1, 'ep_a', 'eth_call', 0, 60_001, 1, 20);
  t.equal(worker.ru, 20);
  t.same(worker.takeShipment(), ['ep_a', 1, 'eth_call', 60, 0, 1, 20], 'the second call is shipped');
});
