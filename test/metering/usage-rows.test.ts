import t from 'tap';
import { createPendingUsage } from '../../src/metering/usage-rows.js';

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
