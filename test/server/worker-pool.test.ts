/** What a gateway's worker threads are started with: the main thread's Node options, less its loader hooks. */
import t from 'tap';
import { workerExecArgv } from '../../src/server/worker-pool.js';

t.test('loader hooks are left out, in either form; every other option is kept in order', async (t) => {
  t.same(
    workerExecArgv([
      '--import=file:///x/mock.mjs',
      '--enable-source-maps',
      '--import',
      'tsx',
      '--max-semi-space-size=8',
      '-r',
      './apm.cjs',
      '--require=./b.cjs',
      '--loader',
      'ts-node/esm',
      '--experimental-loader=./l.mjs',
      '--stack-size=2000',
    ]),
    ['--enable-source-maps', '--max-semi-space-size=8', '--stack-size=2000'],
  );
  t.same(workerExecArgv([]), []);
  // This very process runs under tap and tsx, through --import: none of it reaches a worker.
  t.ok(process.execArgv.some((a) => a.startsWith('--import')));
  t.notOk(workerExecArgv(process.execArgv).some((a) => a.startsWith('--import')));
});
