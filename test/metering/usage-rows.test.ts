/** The usage rows waiting to be written: one row per endpoint, method, minute and status, whatever the order of the counts. */
import t from 'tap';
import { LATENCY_BUCKET_COUNT } from '../../src/store/latency-columns.js';
import { createPendingUsage, MAX_PENDING_FAILURES, type PendingFailure, usageRowParams } from '../../src/metering/usage-rows.js';

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
      { endpointId: 'ep1', ownerId: 1, method: 'eth_call', t: 300, status: 0, requests: 4, ru: 40, latency: null },
      { endpointId: 'ep1', ownerId: 1, method: 'eth_call', t: 300, status: 429, requests: 1, ru: 0, latency: null },
      { endpointId: 'ep1', ownerId: 1, method: 'eth_getBalance', t: 300, status: 0, requests: 1, ru: 15, latency: null },
      { endpointId: 'ep2', ownerId: 2, method: 'eth_call', t: 300, status: 0, requests: 1, ru: 10, latency: null },
      { endpointId: 'ep1', ownerId: 1, method: 'eth_call', t: 360, status: 0, requests: 2, ru: 20, latency: null },
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
    [{ endpointId: 'ep1', ownerId: 1, method: 'eth_call', t: 60, status: 0, requests: 1, ru: 10, latency: null }],
    'the shipment stays as taken',
  );
  t.same([...usage.rows()], [{ endpointId: 'ep1', ownerId: 1, method: 'eth_call', t: 60, status: 0, requests: 1, ru: 10, latency: null }]);
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
  t.same(shipment, ['ep_a', 1, 'eth_call', 60, 0, 2, 40, 0, 'ep_b', 2, 'eth_getBalance', 120, 429, 1, 0, 0], 'untimed: latency 0');

  const writer = createPendingUsage();
  writer.count(1, 'ep_a', 'eth_call', 0, 90_000, 3, 60);
  writer.absorbShipment(structuredClone(shipment));
  t.equal(writer.ru, 100);
  t.same(
    [...writer.rows()],
    [
      { endpointId: 'ep_a', ownerId: 1, method: 'eth_call', t: 60, status: 0, requests: 5, ru: 100, latency: null },
      { endpointId: 'ep_b', ownerId: 2, method: 'eth_getBalance', t: 120, status: 429, requests: 1, ru: 0, latency: null },
    ],
  );
  t.same(worker.takeShipment(), [], 'nothing counted: an empty shipment');
});

t.test('a count after a shipment goes to the next shipment, never into a row already shipped', async (t) => {
  const worker = createPendingUsage();
  worker.count(1, 'ep_a', 'eth_call', 0, 60_000, 1, 20);
  t.same(worker.takeShipment(), ['ep_a', 1, 'eth_call', 60, 0, 1, 20, 0]);
  // The same key as the last count: the run's remembered row must not outlive the shipment.
  worker.count(1, 'ep_a', 'eth_call', 0, 60_001, 1, 20);
  t.equal(worker.ru, 20);
  t.same(worker.takeShipment(), ['ep_a', 1, 'eth_call', 60, 0, 1, 20, 0], 'the second call is shipped');
});

t.test('calls spread over many keys, methods, minutes and statuses: each row exact, shipped or not', async (t) => {
  // A fixed sequence (no Math.random), so a failure repeats: 5,000 endpoints, each with up to 3 methods,
  // 2 minutes and 2 statuses, the counts interleaved as a worker meets them.
  const methods = ['eth_call', 'eth_getBalance', 'eth_chainId'];
  const expected = new Map<
    string,
    { endpointId: string; ownerId: number; method: string; t: number; status: number; requests: number; ru: number }
  >();
  const worker = createPendingUsage();
  const writer = createPendingUsage();
  let seed = 7;
  const next = (n: number): number => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return seed % n;
  };
  for (let i = 0; i < 60_000; i++) {
    const e = next(5000);
    const endpointId = `ep_${e}`;
    const ownerId = e % 7;
    const method = methods[next(3)]!;
    const minute = 10 + next(2);
    const status = next(4) === 0 ? 429 : 0;
    const ru = status === 0 ? 1 + next(30) : 0;
    worker.count(ownerId, endpointId, method, status, minute * MINUTE + next(MINUTE), 1, ru);
    const key = keyOf({ endpointId, method, t: minute * 60, status });
    const row = expected.get(key) ?? { endpointId, ownerId, method, t: minute * 60, status, requests: 0, ru: 0, latency: null };
    row.requests++;
    row.ru += ru;
    expected.set(key, row);
    // Shipped now and then, as a worker does once per event-loop turn.
    if (next(50) === 0) writer.absorbShipment(structuredClone(worker.takeShipment()));
  }
  writer.absorbShipment(structuredClone(worker.takeShipment()));
  t.equal(worker.size, 0);
  t.equal(writer.size, expected.size, 'one row per endpoint, method, minute and status');
  t.equal(
    writer.ru,
    [...expected.values()].reduce((sum, r) => sum + r.ru, 0),
    "the RU are the rows' sum",
  );
  t.same(sorted([...writer.rows()].map((r) => ({ ...r }))), sorted([...expected.values()]));
});

t.test('latency: counted into its bucket, shipped with its row, merged into the same key', async (t) => {
  const worker = createPendingUsage();
  worker.count(1, 'ep_a', 'eth_call', 0, 60_000, 1, 20, 4); // (3, 5]: bucket 4
  worker.count(1, 'ep_a', 'eth_call', 0, 60_001, 1, 20, 4.5);
  worker.count(1, 'ep_a', 'eth_call', 0, 60_002, 1, 20, 40_000); // the last, unbounded bucket
  worker.count(1, 'ep_a', 'eth_subscription', 0, 60_002, 3, 3); // deliveries: untimed
  worker.count(1, 'ep_a', 'eth_call', 429, 60_003, 1, 0, 0.01); // refusals: timed, not kept
  const expected = new Array(LATENCY_BUCKET_COUNT).fill(0);
  expected[4] = 2;
  expected[LATENCY_BUCKET_COUNT - 1] = 1;
  const writer = createPendingUsage();
  writer.count(1, 'ep_a', 'eth_call', 0, 60_500, 1, 20, 0.2); // bucket 0
  const shipment = worker.takeShipment();
  t.same(
    shipment.slice(0, 8 + LATENCY_BUCKET_COUNT),
    ['ep_a', 1, 'eth_call', 60, 0, 3, 60, LATENCY_BUCKET_COUNT, ...expected],
    'flat: a timed row is followed by its counts, no array inside',
  );
  t.ok(
    shipment.every((v) => typeof v !== 'object'),
    'nothing nested',
  );
  writer.absorbShipment(structuredClone(shipment));
  const rows = [...writer.rows()];
  expected[0] = 1;
  t.same(rows[0]?.latency, expected, 'merged bucket by bucket');
  t.equal(rows[1]?.latency, null, 'deliveries carry none');
  t.same(usageRowParams(rows[1]!).slice(7), new Array(LATENCY_BUCKET_COUNT).fill(0), 'written as zeros');
  t.equal(rows[2]?.status, 429);
  t.equal(rows[2]?.latency, null, "a refusal's latency is not kept: the stats read successes' only");
});

t.test('failures: kept beside the rows, bounded, shipped apart, cleared with them', async (t) => {
  const usage = createPendingUsage();
  const failure = (i: number): PendingFailure => ({
    endpointId: 'ep_a',
    ownerId: 1,
    at: i,
    method: 'eth_call',
    httpStatus: 429,
    code: -32005,
    error: 'rate_limited',
    message: 'Rate limit exceeded',
    upstream: null,
  });
  for (let i = 0; i < MAX_PENDING_FAILURES + 10; i++) usage.fail(failure(i));
  t.ok(usage.failures().length <= MAX_PENDING_FAILURES, 'bounded');
  t.equal(usage.failures().at(-1)?.at, MAX_PENDING_FAILURES + 9, 'the newest kept');
  usage.count(1, 'ep_a', 'eth_call', 429, 0, 1, 0);
  usage.takeShipment();
  const shipped = usage.takeFailures();
  t.ok(shipped.length > 0, 'a shipment of rows leaves the failures to takeFailures');
  t.same(usage.failures(), []);
  const writer = createPendingUsage();
  writer.absorbFailures(structuredClone(shipped));
  t.equal(writer.failures().length, shipped.length);
  writer.clear();
  t.same(writer.failures(), [], 'cleared after a write');
});
