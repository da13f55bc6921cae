/**
 * The daemon itself (dist/main.js, `workers: 2`) with a worker paused from outside by a debugger, as an
 * operator would reproduce a worker stuck in a loop: the stall is noticed and the worker replaced, /healthz
 * and `chaingate status` answer, SIGHUP is not held behind it, and a SIGTERM that meets a paused worker
 * still ends with the ledger flushed and `stopped` logged.
 */
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { startDaemon, type Daemon } from '../support/daemon.js';
import { anvilFor } from '../support/gateway.js';
import { send } from '../support/rpc.js';

async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A debugger on the daemon's inspector (--inspect) that pauses one worker thread, as a person would. */
async function debuggerOf(d: Daemon): Promise<{ pause(threadId: number): Promise<void>; close(): void; threads(): number[] }> {
  await waitFor('the inspector address', () => /ws:\/\/127\.0\.0\.1:\d+\/[\w-]+/.test(d.log()));
  const url = /ws:\/\/127\.0\.0\.1:\d+\/[\w-]+/.exec(d.log())![0];
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const sessions = new Map<number, string>();
  let id = 0;
  ws.on('message', (data: Buffer) => {
    const m = JSON.parse(data.toString()) as { method?: string; params?: { sessionId: string; workerInfo: { title: string } } };
    if (m.method !== 'NodeWorker.attachedToWorker') return;
    const thread = Number(/\[worker (\d+)\]/.exec(m.params!.workerInfo.title)![1]);
    sessions.set(thread, m.params!.sessionId);
  });
  const post = (method: string, params: Record<string, unknown>): void => ws.send(JSON.stringify({ id: ++id, method, params }));
  post('NodeWorker.enable', { waitForDebuggerOnStart: false });
  await waitFor('both workers attached', () => sessions.size >= 2);
  return {
    threads: () => [...sessions.keys()],
    async pause(threadId) {
      const sessionId = sessions.get(threadId)!;
      for (const method of ['Debugger.enable', 'Debugger.pause'])
        post('NodeWorker.sendMessageToWorker', { sessionId, message: JSON.stringify({ id: ++id, method, params: {} }) });
    },
    close: () => ws.close(),
  };
}

t.test('a worker paused by a debugger: noticed, replaced; /healthz, /status and SIGHUP answer; SIGTERM still stops', async (t) => {
  const node = await anvilFor(t);
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-pause-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const cfg = join(dir, 'config.yaml');
  writeFileSync(
    cfg,
    'server: { host: 127.0.0.1, port: 0, workers: 2, worker_stall_s: 2, stop_timeout_s: 1 }\n' +
      `storage: { path: ${JSON.stringify(join(dir, 'chaingate.db'))} }\n` +
      `chains:\n  devnet:\n    chain_id: 31337\n    upstreams: [{ url: "${node.url}" }]\n`,
  );
  const d = await startDaemon(t, cfg, { nodeArgs: ['--inspect=127.0.0.1:0'] });
  const dbg = await debuggerOf(d);
  t.teardown(() => dbg.close());
  const base = `http://127.0.0.1:${d.port}`;
  const healthz = async (n: number): Promise<number[]> =>
    (await Promise.all(Array.from({ length: n }, () => send('GET', `${base}/healthz`).catch(() => ({ status: 0 }))))).map((r) => r.status);

  const [first] = dbg.threads();
  await dbg.pause(first!);
  // The pause takes hold at the worker's next JavaScript: a request that reaches it.
  void healthz(16);
  await new Promise((r) => setTimeout(r, 300));
  const asked = Date.now();
  const status = await fetch(`http://127.0.0.1:${d.metricsPort}/status`);
  t.equal(status.status, 200, `/status answers while a worker is paused (in ${Date.now() - asked} ms)`);
  t.equal(((await status.json()) as { workers: { count: number } }).workers.count, 2);
  await waitFor('the stall logged', () => /error worker stalled; ending it worker=\d silent_ms=/.test(d.log()));
  await waitFor('the worker replaced', () => /info worker restarted worker=\d/.test(d.log()));
  t.pass('the paused worker is noticed and replaced');
  t.notMatch(d.log(), /uv_loop_close|Assertion failed/, 'the process did not abort');
  t.same(await healthz(16), Array(16).fill(200), '/healthz answers on every new connection');

  d.child.kill('SIGHUP');
  await waitFor('the reload', () => /info config reloaded/.test(d.log()));
  t.pass('SIGHUP is applied');

  // A SIGTERM that meets a paused worker: the stop ends it and goes on. The watchdog is off during a stop.
  await waitFor('the new worker attached', () => dbg.threads().length >= 3);
  const second = dbg.threads().find((id) => id !== first)!;
  await dbg.pause(second);
  void healthz(16);
  await new Promise((r) => setTimeout(r, 300));
  const exited = new Promise<number | null>((resolve) => d.child.once('exit', (code) => resolve(code)));
  d.child.kill('SIGTERM');
  await waitFor('stopped', () => /info stopped/.test(d.log()), 30_000);
  dbg.close();
  t.equal(await exited, 0, 'the daemon exits 0');
  t.match(d.log(), /error worker did not stop in time; ending it worker=\d/, 'the stop met the paused worker and ended it');
  t.notMatch(d.log(), /the last ledger flush failed|uv_loop_close|Returning from a request handler/, 'the ledger flushed, no abort');
});
