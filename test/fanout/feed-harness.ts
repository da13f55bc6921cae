/** Shared pieces of the feed tests: anvil over plain HTTP, listeners that record, waiting. */
import type { Test } from 'tap';
import { createFeeds, type Feeds, type FeedsOptions, type FeedListener, type UpstreamNode } from '../../src/fanout/feeds.js';
import { type AnvilNode, startAnvil } from '../../src/devnet/anvil.js';
import { rpc } from '../support/rpc.js';
import { DEPLOY_BYTECODE } from '../support/contract.js';

// anvil's first development account: unlocked, so eth_sendTransaction needs no signing here.
export const DEV_ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';

/**
 * An anvil node stopped at teardown. Started here rather than through test/support/gateway.ts so
 * these tests load the feeds and anvil only, not the whole gateway.
 */
export async function anvilFor(t: Test): Promise<AnvilNode> {
  const node = await startAnvil();
  t.teardown(() => node.stop());
  return node;
}

/** A JSON-RPC call over HTTP: the result, or a throw on a JSON-RPC error or a failed connection. */
export async function call(url: string, method: string, params: unknown[] = []): Promise<unknown> {
  const answer = (await rpc(url, method, params)).json as { result?: unknown; error?: { message?: string } } | undefined;
  if (!answer || answer.error !== undefined || !('result' in answer)) throw new Error(`${method}: ${JSON.stringify(answer?.error ?? answer)}`);
  return answer.result;
}

export function nodeAt(label: string, wsUrl: string, httpUrl: string): UpstreamNode {
  return { label, wsUrl, call: (method, params) => call(httpUrl, method, params) };
}

export async function mine(url: string, blocks = 1): Promise<void> {
  for (let i = 0; i < blocks; i++) await call(url, 'evm_mine');
}

export async function blockNumber(url: string): Promise<number> {
  return Number(await call(url, 'eth_blockNumber'));
}

export async function blockAt(url: string, n: number): Promise<Record<string, unknown>> {
  return (await call(url, 'eth_getBlockByNumber', [`0x${n.toString(16)}`, false])) as Record<string, unknown>;
}

/** anvil answers eth_sendTransaction before the block holding it is readable: wait for the receipt. */
async function receiptOf(url: string, hash: unknown): Promise<{ contractAddress: string | null }> {
  for (let i = 0; i < 200; i++) {
    const receipt = (await call(url, 'eth_getTransactionReceipt', [hash])) as { contractAddress: string | null } | null;
    if (receipt) return receipt;
    await sleep(10);
  }
  throw new Error(`transaction ${String(hash)} was not mined`);
}

/** Deploys the Echo contract (test/support/contract.ts) and returns its address. */
export async function deployEcho(url: string): Promise<string> {
  const hash = await call(url, 'eth_sendTransaction', [{ from: DEV_ADDRESS, data: DEPLOY_BYTECODE }]);
  return (await receiptOf(url, hash)).contractAddress!;
}

/** One transaction to the Echo contract, its log's data `data`; with `mined`, returns once it is in a block. */
export async function echo(url: string, address: string, data: string, mined = true): Promise<string> {
  const hash = (await call(url, 'eth_sendTransaction', [{ from: DEV_ADDRESS, to: address, data }])) as string;
  if (mined) await receiptOf(url, hash);
  return hash;
}

export interface Recorder extends FeedListener {
  readonly texts: string[];
  readonly losses: string[];
  parsed(): Array<Record<string, unknown>>;
}

export function recorder(): Recorder {
  const texts: string[] = [];
  const losses: string[] = [];
  return {
    texts,
    losses,
    notify: (json) => void texts.push(json),
    lost: (reason) => void losses.push(reason),
    parsed: () => texts.map((x) => JSON.parse(x) as Record<string, unknown>),
  };
}

export const numbersOf = (r: Recorder): number[] => r.parsed().map((h) => Number(h.number));

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once `condition` holds (checked every 10 ms); rejects after `ms`, naming what was awaited. */
export async function until(what: string, condition: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(10);
  }
}

export interface TestFeeds {
  feeds: Feeds;
  logs: string[];
}

/** Feeds whose log lines are kept for assertions; closed at teardown. */
export function feedsFor(t: Test, opts: Omit<FeedsOptions, 'log'>): TestFeeds {
  const logs: string[] = [];
  const feeds = createFeeds({
    ...opts,
    log: (level, msg, fields) => logs.push(`${level} ${msg} ${JSON.stringify(fields ?? {})}`),
  });
  t.teardown(() => feeds.close());
  return { feeds, logs };
}

/** The block as a newHeads notification carries it: written out here rather than taken from the code under test. */
export function headerOf(block: Record<string, unknown>): Record<string, unknown> {
  const { transactions: _t, uncles: _u, size: _s, totalDifficulty: _d, ...header } = block;
  return header;
}
