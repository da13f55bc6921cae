import t from 'tap';
import { createPipeliningGuard } from '../../src/upstreams/pipelining-guard.js';

t.test('three held answers, spaced apart within 10 s, suspend pipelining for five minutes', async (t) => {
  const guard = createPipeliningGuard(8);
  guard.observe(42, 1, 1_000);
  guard.observe(43, 1, 1_050);
  t.equal(guard.depth, 8, 'answers held at one moment count once: a node pause, not a pattern');
  guard.observe(44, 1, 1_200);
  t.equal(guard.depth, 8);
  guard.observe(41, 1, 1_400);
  t.equal(guard.depth, 1, 'the third strike suspends');
  guard.review(1_400 + 299_999);
  t.equal(guard.depth, 1);
  guard.review(1_400 + 300_000);
  t.equal(guard.depth, 8, 'tried again after the suspension');
});

t.test('answers that are only a little late, or far too late for a delayed acknowledgement, are no strikes', async (t) => {
  const guard = createPipeliningGuard(8);
  for (let i = 0; i < 10; i++) guard.observe(25, 1, 1_000 + i * 200);
  for (let i = 0; i < 10; i++) guard.observe(400, 1, 5_000 + i * 200);
  // A remote node: 80 ms is its usual answer time, so 100 ms is not late.
  for (let i = 0; i < 10; i++) guard.observe(100, 80, 9_000 + i * 200);
  t.equal(guard.depth, 8);
});

t.test('strikes further apart than 10 s do not add up', async (t) => {
  const guard = createPipeliningGuard(8);
  for (let i = 0; i < 10; i++) guard.observe(45, 1, i * 6_000);
  t.equal(guard.depth, 8);
});

t.test('with pipelining configured off there is nothing to suspend or restore', async (t) => {
  const guard = createPipeliningGuard(1);
  for (let i = 0; i < 5; i++) guard.observe(45, 1, i * 200);
  guard.review(10_000_000);
  t.equal(guard.depth, 1);
});
