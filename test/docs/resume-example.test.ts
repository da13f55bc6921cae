/**
 * The reconnect loop docs/websocket.md shows (between its resume-example markers) runs as written: against a
 * gateway with two worker threads in front of a real anvil, reached through a TCP relay that cuts the client's
 * connection while blocks are mined, it hands every block once and in order, those mined while it was away
 * included.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { anvilFor, gatewayFor } from '../support/gateway.js';
import { nodeCall, waitUntil } from '../support/subscriber.js';
import { tcpRelay } from '../support/tcp-relay.js';

const root = join(import.meta.dirname, '..', '..');

/** The example's code, as the page shows it. */
function example(): string {
  const page = readFileSync(join(root, 'docs', 'websocket.md'), 'utf8');
  const m = /<!-- resume-example:start -->\n```ts\n([\s\S]*?)```\n<!-- resume-example:end -->/.exec(page);
  if (m === null) throw new Error('docs/websocket.md has no resume example between its markers');
  return m[1]!;
}

t.test("the docs' viem reconnect loop resumes after a cut: every block once, in order", async (t) => {
  const node = await anvilFor(t, { chainId: 31337 });
  const g = await gatewayFor(t, {
    server: { workers: 2 },
    chains: { devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.wsUrl }] } },
  });
  const relay = await tcpRelay(t, { port: Number(new URL(g.base).port) });
  // Written beside the tests, so its `viem/utils` import resolves to the project's viem.
  const dir = mkdtempSync(join(root, 'test', 'docs', '.example-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'follow-heads.ts');
  writeFileSync(file, example());
  const { followHeads } = (await import(pathToFileURL(file).href)) as {
    followHeads(url: string, onHead: (h: { number: string; hash: string }) => void): () => void;
  };
  const heads: Array<{ number: string; hash: string }> = [];
  const stop = followHeads(`${relay.wsUrl}/v1/rpc/public`, (h) => heads.push(h));
  t.teardown(stop);
  const mine = (n: number): Promise<unknown> => nodeCall(node.url, 'anvil_mine', [`0x${n.toString(16)}`]);
  const head = async (): Promise<number> => Number(await nodeCall<string>(node.url, 'eth_blockNumber'));
  // Subscribed once a block mined now reaches it.
  for (let tries = 0; heads.length === 0; tries++) {
    if (tries === 100) throw new Error('the example never received a head');
    await mine(1);
    await new Promise((r) => setTimeout(r, 200));
  }
  for (let round = 0; round < 2; round++) {
    await mine(2);
    const seen = await head();
    await waitUntil(() => heads.some((h) => Number(h.number) === seen), 20_000, `round ${round}: head ${seen}`);
    relay.cut();
    await mine(5); // missed while the client is cut off
    relay.restore();
  }
  await mine(2);
  const last = await head();
  await waitUntil(() => heads.some((h) => Number(h.number) === last), 30_000, `head ${last} after the cuts`);
  const first = Number(heads[0]!.number);
  t.same(
    heads.map((h) => Number(h.number)),
    Array.from({ length: last - first + 1 }, (_, i) => first + i),
    `every block from ${first} to ${last} once, in order, across two cuts`,
  );
  t.ok(relay.upgrades.length >= 3, `it reconnected after each cut (${relay.upgrades.length} upgrades)`);
});
