/** What a gateway's worker threads are started with: the main thread's Node options, less its loader hooks. */
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { workerExecArgv } from '../../src/server/worker-pool.js';

t.test('loader hooks and V8 options are left out, in either form; every other option is kept in order', async (t) => {
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
    ['--enable-source-maps'],
    'V8 options are left out too: a Worker refuses them',
  );
  // What `npm start` and the systemd unit pass: a real Worker must accept what is left.
  const worker = new Worker('process.exit(0)', {
    eval: true,
    execArgv: workerExecArgv(['--max-semi-space-size=8', '--enable-source-maps']),
  });
  t.equal(await new Promise((resolve) => worker.once('exit', resolve)), 0, 'a Worker starts with the options of npm start');
  t.same(workerExecArgv([]), []);
  // This very process runs under tap and tsx, through --import: none of it reaches a worker.
  t.ok(process.execArgv.some((a) => a.startsWith('--import')));
  t.notOk(workerExecArgv(process.execArgv).some((a) => a.startsWith('--import')));
});
