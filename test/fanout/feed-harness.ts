/** Shared pieces of the feed tests: anvil over plain HTTP, listeners that record, waiting. */
import type { Test } from 'tap';
import { createFeeds, type Feeds, type FeedsOptions, type FeedListener, type UpstreamNode } from '../../src/fanout/feeds.js';
import { type AnvilNode, startAnvil } from '../../src/devnet/anvil.js';
import { result as call } from '../support/dev-chain.js';

/** A JSON-RPC call over HTTP: the result, or a throw on a JSON-RPC error or a failed connection. */
export { call };
export { DEV_ADDRESS, deployEcho, echo } from '../support/dev-chain.js';

/**
 * An anvil node stopped at teardown. Started here rather than through test/support/gateway.ts so
 * these tests load the feeds and anvil only, not the whole gateway.
 */
export async function anvilFor(t: Test): Promise<AnvilNode> {
  const node = await startAnvil();
  t.teardown(() => node.stop());
  return node;
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
