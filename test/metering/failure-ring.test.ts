import t from 'tap';
import { newestFailures, writeFailures } from '../../src/metering/failure-ring.js';
import type { PendingFailure } from '../../src/metering/usage-rows.js';
import type { Statements } from '../../src/store/statements.js';

const failure = (endpointId: string, i: number): PendingFailure => ({
  endpointId,
  ownerId: 1,
  at: i,
  method: 'eth_call',
  httpStatus: 502,
  code: -32603,
  error: 'upstream_error',
  message: 'Upstream node error',
  upstream: `node-${i}`,
});

t.test('newestFailures: the newest `kept` of each endpoint, oldest first, and every endpoint to cut', async (t) => {
  const failures = [failure('a', 0), failure('b', 1), failure('a', 2), failure('a', 3), failure('c', 4), failure('a', 5), failure('b', 6)];
  const { add, endpoints } = newestFailures(failures, 2);
  t.same(
    add.map((f) => f.upstream),
    ['node-1', 'node-3', 'node-4', 'node-5', 'node-6'],
  );
  t.same([...endpoints].sort(), ['a', 'b', 'c']);
  t.same(newestFailures([], 2), { add: [], endpoints: new Set() });
});

t.test('writeFailures: a flooded endpoint inserts only what its ring keeps', async (t) => {
  const inserted: unknown[][] = [];
  const trimmed: unknown[][] = [];
  const sql = {
    addFailure: { run: (...p: unknown[]) => inserted.push(p) },
    trimFailures: { run: (...p: unknown[]) => trimmed.push(p) },
  } as unknown as Statements['ledger'];
  const failures = Array.from({ length: 1000 }, (_, i) => failure(i === 500 ? 'quiet' : 'flooded', i));
  writeFailures(sql, failures, 100);
  t.equal(inserted.length, 101, "the flooded endpoint's newest 100 and the quiet one's");
  t.equal(inserted.at(-1)?.[8], 'node-999', 'the newest is inserted last');
  t.equal(inserted[0]?.[8], 'node-500', 'oldest first');
  t.same(trimmed, [
    ['flooded', 'flooded', 100],
    ['quiet', 'quiet', 100],
  ]);
});
