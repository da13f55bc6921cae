/**
 * What `npm test` runs before tap: the build (the daemon and its dashboard), the type checks of the tests
 * and the dashboard, the layer rules, the linter, and tap's own build (npm installs tap built with
 * ts-node; the package.json's plugins need a rebuild). They
 * are independent, so they run two at a time (the suite's machine has two cores); each one's output is
 * shown only when it fails, and every failure is reported before the exit.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

const CHECKS = [
  ['build', 'npm', ['run', 'build', '--silent']],
  ['typecheck tests', 'npx', ['tsc', '-p', 'tsconfig.test.json']],
  ['typecheck dashboard', 'npx', ['tsc', '-p', 'dashboard/tsconfig.json']],
  ['layers', 'npx', ['depcruise', '--config', '.dependency-cruiser.cjs', 'src']],
  ['lint', 'npx', ['biome', 'check', '--error-on-warnings', 'src', 'test', 'bench', 'dashboard']],
  ['tap build', 'npx', ['tap', 'build']],
];
const PARALLEL = 2;

function run([name, cmd, args]) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (out += b));
    child.on('close', (code) => {
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      process.stdout.write(`${code === 0 ? 'ok' : 'FAILED'}: ${name} (${seconds} s)\n`);
      if (code !== 0) process.stdout.write(`${out}\n`);
      resolve(code === 0);
    });
  });
}

// The build writes chaingate.schema.json from the source. A checked-in copy the build had to change was
// stale: the test that compares it with the source would then pass on the rewritten copy, so the
// rewrite itself is the failure (commit the regenerated file).
const SCHEMA = 'chaingate.schema.json';
const schemaBefore = readFileSync(SCHEMA, 'utf8');

const queue = [...CHECKS];
const results = [];
await Promise.all(
  Array.from({ length: PARALLEL }, async () => {
    for (let check = queue.shift(); check !== undefined; check = queue.shift()) results.push(await run(check));
  }),
);
if (readFileSync(SCHEMA, 'utf8') !== schemaBefore) {
  process.stdout.write(`FAILED: ${SCHEMA} was stale; the build rewrote it from the source: commit it\n`);
  results.push(false);
}
process.exit(results.every(Boolean) ? 0 : 1);
