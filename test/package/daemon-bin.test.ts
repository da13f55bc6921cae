/**
 * startDaemon's `bin` (the package tests' installed command) keeps the options that do not concern node: the
 * open-files limit applies to it too, and node flags, which a command does not take, are refused, not dropped.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { startDaemon, stopDaemon } from '../support/daemon.js';
import { anvilFor } from '../support/gateway.js';

const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

const dir = mkdtempSync(join(tmpdir(), 'chaingate-bin-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
// A command as npm installs one: a program of its own that runs the daemon (here, this tree's build).
const bin = join(dir, 'chaingate');
writeFileSync(bin, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(main)} "$@"\n`);
chmodSync(bin, 0o755);

async function config(): Promise<string> {
  const node = await anvilFor(t);
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    [
      'server: { host: 127.0.0.1, port: 0, workers: 1 }',
      `storage: { path: ${JSON.stringify(join(dir, 'chaingate.db'))} }`,
      'chains:',
      '  devnet:',
      '    chain_id: 31337',
      `    upstreams: [{ url: "${node.url}" }]`,
      '',
    ].join('\n'),
  );
  return file;
}

t.test('openFiles limits the command bin runs', async (t) => {
  const d = await startDaemon(t, await config(), { bin, openFiles: 777 });
  t.teardown(() => stopDaemon(d));
  const limits = readFileSync(`/proc/${d.child.pid}/limits`, 'utf8');
  t.match(limits, /^Max open files\s+777\s+777\s/m);
});

t.test('nodeArgs with bin are refused', async (t) => {
  t.throws(() => startDaemon(t, join(dir, 'none.yaml'), { bin, nodeArgs: ['--inspect=0'] }), /nodeArgs go to node, which bin is not/);
});
