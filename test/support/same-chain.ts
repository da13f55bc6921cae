/**
 * Anvils on one chain, for tests of a chain served by several nodes (docs/consistency.md): the same genesis and
 * the same blocks, so their block hashes agree, mined apart so they stand at different heights. Each node starts
 * with mining off; a block is mined on a node at its fixed timestamp with the same transactions on every node
 * (sent unsigned from anvil's first account with every field given, so anvil signs the same bytes everywhere).
 */
import type { Test } from 'tap';
import { getContractAddress } from 'viem';
import type { AnvilNode } from '../../src/devnet/anvil.js';
import { DEPLOY_BYTECODE } from './contract.js';
import { anvilFor } from './gateway.js';
import { rpc } from './rpc.js';

/** Genesis time of every node, in unix seconds; block n is mined at GENESIS_TIME + 12 n. */
export const GENESIS_TIME = 1_700_000_000;
/** anvil's first and second default accounts: the sender of every block's transaction and its recipient. */
export const SENDER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
export const RECIPIENT = '0x70997970c51812dc3a010c55fdfea6e1ef2c3d4b';
/** With `logs`: the echo contract (contract.ts) SENDER deploys in block 1; each later block holds a call to it. */
export const ECHO_ADDRESS = getContractAddress({ from: SENDER, nonce: 0n }).toLowerCase();

export interface SameChain {
  readonly nodes: readonly AnvilNode[];
  /** Each node's height as this helper mined it. */
  readonly heights: readonly number[];
  /**
   * Mines node `i` up to `height` (blocks it has not yet), each block the same on every node: with
   * `transfers` (default true) block n holds one transfer of n wei from SENDER to RECIPIENT (nonce n - 1), so a
   * nonce and a balance tell the block a state was read at. With `logs`, block 1 deploys the echo contract
   * (ECHO_ADDRESS, nonce 0) and block n > 1 calls it with n wei and calldata n as 32 bytes (nonce n - 1), so it
   * holds one log of ECHO_TOPIC whose data is n.
   */
  mineTo(i: number, height: number): Promise<void>;
  /** Takes every node back to its genesis block (anvil_reset): the chain starts over, as after a devnet reset. */
  reset(): Promise<void>;
}

async function call(url: string, method: string, params: unknown[]): Promise<unknown> {
  const answer = await rpc(url, method, params);
  const body = answer.json as { result?: unknown; error?: { message?: string } };
  if (body.error !== undefined) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}

/** What block n's transaction does: a transfer, or with `logs` the echo contract's deployment (n = 1) or a call to it. */
function blockTransaction(n: number, logs: boolean): Record<string, string> {
  const value = `0x${n.toString(16)}`;
  if (!logs) return { to: RECIPIENT, value, gas: '0x5208' };
  if (n === 1) return { data: DEPLOY_BYTECODE, gas: '0x30d40' };
  return { to: ECHO_ADDRESS, value, data: `0x${n.toString(16).padStart(64, '0')}`, gas: '0x186a0' };
}

/** `count` anvils with chain id `chainId`, all at block 0, stopped at teardown. */
export async function sameChainAnvils(
  t: Test,
  count: number,
  opts: { chainId?: number; transfers?: boolean; logs?: boolean } = {},
): Promise<SameChain> {
  const args = ['--timestamp', String(GENESIS_TIME), '--no-mining'];
  const nodes = await Promise.all(
    Array.from({ length: count }, () => anvilFor(t, { args, ...(opts.chainId !== undefined ? { chainId: opts.chainId } : {}) })),
  );
  const heights = nodes.map(() => 0);
  const transfers = opts.transfers ?? true;
  return {
    nodes,
    heights,
    async reset() {
      await Promise.all(nodes.map((n) => call(n.url, 'anvil_reset', [])));
      heights.fill(0);
    },
    async mineTo(i, height) {
      const url = nodes[i]!.url;
      for (let n = heights[i]! + 1; n <= height; n++) {
        if (transfers || opts.logs === true)
          await call(url, 'eth_sendTransaction', [
            {
              from: SENDER,
              ...blockTransaction(n, opts.logs === true),
              nonce: `0x${(n - 1).toString(16)}`,
              maxFeePerGas: '0x3b9aca00',
              maxPriorityFeePerGas: '0x1',
              type: '0x2',
              chainId: `0x${(opts.chainId ?? 31337).toString(16)}`,
            },
          ]);
        await call(url, 'evm_mine', [{ timestamp: GENESIS_TIME + 12 * n, blocks: 1 }]);
        heights[i] = n;
      }
    },
  };
}
