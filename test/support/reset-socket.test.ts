/**
 * resetSocket on a socket whose FIN is in flight: the process must still exit (with resetAndDestroy
 * alone it spun at exit forever, which the suite saw only as a file timing out).
 */
import { spawn } from 'node:child_process';
import t from 'tap';

const CHILD = `
import { createServer, connect } from 'node:net';
import { resetSocket } from './test/support/reset-socket.ts';
const server = createServer((s) => {
  s.on('error', () => {});
  s.end('bye'); // the shutdown is queued: the FIN is not out yet
  resetSocket(s);
  server.close();
});
server.listen(0, '127.0.0.1', () => {
  const c = connect(server.address().port, '127.0.0.1');
  c.on('error', () => {});
  c.resume();
  c.on('close', () => console.log('closed'));
});
`;

t.test('a socket reset while its shutdown is in flight lets the process exit', async (t) => {
  const child = spawn(process.execPath, ['--import=tsx', '--input-type=module', '-e', CHILD], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(killer);
  t.equal(code, 0, 'the process exited by itself');
  t.equal(out.trim(), 'closed', 'and the peer saw the socket close');
});
