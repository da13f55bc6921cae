import t from 'tap';
import {
  emptyLatency,
  LATENCY_BOUNDS_MS,
  latencyBucket,
  latencyQuantile,
  latencySummary,
  mergeLatency,
} from '../../src/metering/latency-histogram.js';
import { LATENCY_BUCKET_COUNT } from '../../src/store/latency-columns.js';

t.test('a latency falls in the bucket whose upper bound it does not pass', async (t) => {
  t.equal(latencyBucket(0), 0);
  t.equal(latencyBucket(0.5), 0, 'bounds are inclusive');
  t.equal(latencyBucket(0.51), 1);
  for (const [i, bound] of LATENCY_BOUNDS_MS.entries()) {
    t.equal(latencyBucket(bound), i, `${bound} ms`);
    t.equal(latencyBucket(bound * 1.0001), i + 1, `just above ${bound} ms`);
  }
  t.equal(latencyBucket(1e9), LATENCY_BUCKET_COUNT - 1, 'slower than the last bound: the open bucket');
  t.ok(
    LATENCY_BOUNDS_MS.every((b, i) => i === 0 || b > LATENCY_BOUNDS_MS[i - 1]!),
    'bounds grow',
  );
});

t.test('quantiles are placed linearly inside their bucket; nothing timed is null', async (t) => {
  t.same(latencySummary(emptyLatency()), { p50: null, p95: null, p99: null });
  const counts = emptyLatency();
  counts[latencyBucket(8)] = 10; // (7, 10]
  t.equal(latencyQuantile(counts, 0.5), 8.5);
  t.equal(latencyQuantile(counts, 1), 10);
  const open = emptyLatency();
  open[LATENCY_BUCKET_COUNT - 1] = 3;
  t.equal(latencyQuantile(open, 0.99), 30_000, 'the open bucket answers its lower bound');
});

t.test('merged histograms give the quantiles of all their calls, not an average of theirs', async (t) => {
  // 90 fast calls in one minute, 10 slow ones in another: the p95 of both is slow, their p95s' mean is not.
  const fast = emptyLatency();
  fast[latencyBucket(2)] = 90;
  const slow = emptyLatency();
  slow[latencyBucket(400)] = 10;
  const both = emptyLatency();
  mergeLatency(both, fast);
  mergeLatency(both, slow);
  t.equal(
    both.reduce((a, b) => a + b, 0),
    100,
  );
  const p95 = latencyQuantile(both, 0.95)!;
  t.ok(p95 > 300 && p95 <= 500, `p95 ${p95} ms among the slow calls`);
  t.ok(latencyQuantile(both, 0.5)! <= 2, 'p50 among the fast ones');
});
