/**
 * The devnet's execution client gives up on a node that never answers, after its timeout, even when
 * garbage collections run while it waits (on Node 20 a timeout signal inside AbortSignal.any() could be
 * collected before it fired, and the beacon node's poll of anvil then waited forever), and at once when
 * the node stops.
 */
import { createServer } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import t, { type Test } from 'tap';
import { createExecutionClient } from '../../src/devnet/beacon/execution-client.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

async function silentNode(t: Test): Promise<string> {
  const server = createServer(() => {}); // reads each request, answers none
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())).then(() => server.closeAllConnections()));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

/** How `p` settled within `ms`: 'rejected' with its message, or 'pending'. */
async function within(p: Promise<unknown>, ms: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('pending'), ms)));
  const settled = p.then(
    () => 'resolved',
    (e: Error) => `rejected: ${e.message}`,
  );
  const outcome = await Promise.race([settled, late]);
  clearTimeout(timer);
  return outcome;
}

t.test('a node that never answers: the call fails after the timeout, garbage collections or not', async (t) => {
  const url = await silentNode(t);
  const stop = new AbortController();
  t.teardown(() => stop.abort());
  const client = createExecutionClient(url, stop.signal, 300);
  const collecting = setInterval(gc, 10);
  t.teardown(() => clearInterval(collecting));
  const started = Date.now();
  t.match(await within(client.block('latest'), 5000), /^rejected: .*within 300 ms/, 'rejected by the timeout, not left waiting');
  t.ok(Date.now() - started >= 290, 'and not before it');
});

t.test('stopping the node ends a waiting call at once', async (t) => {
  const url = await silentNode(t);
  const stop = new AbortController();
  const client = createExecutionClient(url, stop.signal, 60_000);
  const call = client.chainId();
  setTimeout(() => stop.abort(new Error('stopped')), 50);
  t.match(await within(call, 2000), /^rejected: stopped/, 'rejected with the stop');
  t.match(await within(client.chainId(), 2000), /^rejected: stopped/, 'and a call after the stop fails at once');
});
