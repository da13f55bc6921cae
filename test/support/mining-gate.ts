/**
 * An HTTP relay in front of a node that a test closes while it mines the node: anvil answers a read about its own
 * head from its live state, which a block being mined has already changed, so a read that meets a mining node can
 * see the next block's state at this block's number. Behind a gate, calls wait while the node mines and the node
 * mines only once the calls in flight are answered: the gateway sees each block whole.
 */
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

export interface MiningGate {
  readonly url: string;
  /** Runs `mine` with no call in flight to the node, holding the calls that come meanwhile until it ends. */
  closedFor<T>(mine: () => Promise<T>): Promise<T>;
}

export async function miningGate(t: Test, nodeUrl: string): Promise<MiningGate> {
  const target = new URL(nodeUrl);
  const agent = new Agent({ keepAlive: true });
  let inFlight = 0;
  let closed: Promise<void> | null = null;
  let drained: (() => void) | null = null;

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      while (closed !== null) await closed;
      inFlight++;
      const body = Buffer.concat(chunks);
      const up = request(
        { host: target.hostname, port: target.port, path: target.pathname, method: 'POST', agent, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          answer.on('end', done);
          answer.on('error', done);
        },
      );
      up.on('error', () => {
        res.destroy();
        done();
      });
      up.end(body);
    });
  });
  function done(): void {
    if (--inFlight === 0) drained?.();
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    agent.destroy();
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async closedFor(mine) {
      while (closed !== null) await closed;
      let open!: () => void;
      closed = new Promise((resolve) => {
        open = resolve;
      });
      try {
        if (inFlight > 0) await new Promise<void>((resolve) => (drained = resolve));
        drained = null;
        return await mine();
      } finally {
        closed = null;
        open();
      }
    },
  };
}
