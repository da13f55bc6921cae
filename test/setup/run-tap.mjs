/**
 * Runs tap (its TAP stream shown as it comes, for progress) and, at the end, lists every failed test again
 * with its file and diagnostics: a suite of 33,000 assertions writes a long log, and a CI that keeps only
 * its tail would otherwise not show which test failed. Exits with tap's status.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const tap = spawn('npx', ['tap', ...process.argv.slice(2)], { stdio: ['ignore', 'pipe', 'inherit'] });
const failures = [];
let file = '';
let block = null;

createInterface({ input: tap.stdout }).on('line', (line) => {
  process.stdout.write(`${line}\n`);
  const subtest = /^# Subtest: (\S+)/.exec(line);
  if (subtest) file = subtest[1];
  if (block !== null) {
    block.push(line);
    // A failure's diagnostics are a YAML block that ends with `...` at the failure's own indentation.
    if (line.trim() === '...' || block.length > 80) {
      failures.push(block);
      block = null;
    }
    return;
  }
  if (/^\s*not ok /.test(line) && !/# (TODO|SKIP)/.test(line)) block = [`${file}:`, line];
});

tap.on('close', (code, signal) => {
  if (block !== null) failures.push(block);
  if (failures.length > 0) {
    process.stdout.write(`\n${failures.length} failed (each with the files and subtests it failed in):\n\n`);
    for (const b of failures) process.stdout.write(`${b.join('\n')}\n\n`);
  }
  process.exit(code ?? (signal ? 1 : 0));
});
