/**
 * An HTTP relay in front of a real node that alters some of its answers, for tests of the gateway's answer
 * checks (docs/consistency.md): everything is forwarded to the node, and the answers of the methods its
 * settings name are changed on their way back. Each setting can be changed while the relay runs.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

/** A hash no real block has. */
export const FORGED_HASH = `0x${'f0'.repeat(32)}`;
/** An address no log of the same-chain helper's blocks has (its RECIPIENT: the echo contract's logs are its own). */
export const FORGED_ADDRESS = '0x70997970c51812dc3a010c55fdfea6e1ef2c3d4b';

export interface RelaySettings {
  /** eth_getBlockByNumber asked with full transactions (as the gateway's own head backfills never ask): the hash replaced. */
  blockHash: boolean;
  /** eth_getLogs: the first log dropped (`drop`) or its address replaced (`move`). */
  logs: 'drop' | 'move' | null;
  /** eth_getTransactionReceipt: the blockHash replaced. */
  receiptBlockHash: boolean;
}

export interface AnswerRelay {
  readonly url: string;
  readonly settings: RelaySettings;
  /** Calls relayed, by method. */
  readonly calls: Map<string, number>;
}

interface Call {
  id: unknown;
  method: string;
  params?: unknown[];
}

function alter(settings: RelaySettings, call: Call, answer: { result?: unknown }): void {
  const result = answer.result;
  if (result === null || typeof result !== 'object') return;
  if (call.method === 'eth_getBlockByNumber' && settings.blockHash && call.params?.[1] === true) {
    (result as Record<string, unknown>).hash = FORGED_HASH;
  } else if (call.method === 'eth_getLogs' && settings.logs !== null && Array.isArray(result) && result.length > 0) {
    if (settings.logs === 'drop') result.shift();
    else result[0] = { ...(result[0] as object), address: FORGED_ADDRESS };
  } else if (call.method === 'eth_getTransactionReceipt' && settings.receiptBlockHash) {
    (result as Record<string, unknown>).blockHash = FORGED_HASH;
  }
}

/** A relay to the node at `target`, closed at teardown; it alters nothing until its settings say so. */
export async function answerRelay(t: Test, target: string, settings: Partial<RelaySettings> = {}): Promise<AnswerRelay> {
  const relay: AnswerRelay = {
    url: '',
    settings: { blockHash: false, logs: null, receiptBlockHash: false, ...settings },
    calls: new Map(),
  };
  const server = createServer({ keepAlive: true }, (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString();
      try {
        const upstream = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const parsed = JSON.parse(body) as Call | Call[];
        const answers = (await upstream.json()) as { result?: unknown } | Array<{ result?: unknown }>;
        const calls = Array.isArray(parsed) ? parsed : [parsed];
        const list = Array.isArray(answers) ? answers : [answers];
        calls.forEach((call, i) => {
          relay.calls.set(call.method, (relay.calls.get(call.method) ?? 0) + 1);
          if (list[i] !== undefined) alter(relay.settings, call, list[i]!);
        });
        res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(JSON.stringify(answers));
      } catch {
        res.writeHead(502).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { ...relay, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
