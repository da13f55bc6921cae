/**
 * The shape the source keeps (docs/decisions.md, "Structure"): small files named after what they own,
 * functions short enough to read whole, unions told apart by a `kind` rather than by which keys an
 * object has. A change that grows past a limit splits the unit instead of raising the limit.
 */
import { join } from 'node:path';
import t from 'tap';
import { measure } from './measure.js';

const ROOT = join(import.meta.dirname, '..', '..');
const LIMITS = { fileLines: 400, functionLines: 150 };
/** `'x' in y` stays only on data from outside (parsed JSON, a database row): at most this many. */
const MAX_IN_TESTS = 8;

const shape = measure(ROOT, LIMITS);

t.same(Object.fromEntries(shape.files), {}, `no file in src/ over ${LIMITS.fileLines} lines`);
t.same(Object.fromEntries(shape.functions), {}, `no function in src/ over ${LIMITS.functionLines} lines`);
t.ok(shape.inTests.length <= MAX_IN_TESTS, `at most ${MAX_IN_TESTS} 'x' in y tests in src/: ${shape.inTests.join(', ')}`);

t.test('the measure sees what it counts', async (t) => {
  // Against limits this source cannot meet, every file and function is over: the walk found them all.
  const tight = measure(ROOT, { fileLines: 1, functionLines: 1 });
  t.ok(tight.files.size > 100, `${tight.files.size} files measured`);
  t.ok(
    [...tight.functions.keys()].some((k) => k.startsWith('src/main.ts:')),
    'functions in src/main.ts measured',
  );
});
