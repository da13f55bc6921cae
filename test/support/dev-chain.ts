/**
 * Transactions on a test anvil from its first development account (unlocked, so eth_sendTransaction needs
 * no signing), and the Echo contract (contract.ts) deployed and called with them.
 */
import { DEPLOY_BYTECODE } from './contract.js';
import { rpc } from './rpc.js';

export const DEV_ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';

/** A JSON-RPC call's result: a throw on a JSON-RPC error or a failed connection. */
export async function result<T = unknown>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const answer = (await rpc(url, method, params)).json as { result?: T; error?: unknown } | undefined;
  if (!answer || answer.error !== undefined || !('result' in answer))
    throw new Error(`${method} refused: ${JSON.stringify(answer?.error ?? answer)}`);
  return answer.result as T;
}

export interface Receipt {
  contractAddress: string | null;
  blockNumber: string;
  blockHash: string;
}

/** A transaction's receipt once its block is readable: anvil may answer eth_sendTransaction before it is. */
export async function minedReceipt(url: string, hash: string): Promise<Receipt> {
  for (let i = 0; i < 200; i++) {
    const receipt = await result<Receipt | null>(url, 'eth_getTransactionReceipt', [hash]);
    if (receipt !== null) return receipt;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`transaction ${hash} was not mined within 2 s`);
}

/** Deploys the Echo contract and returns its address; with the dev account's first nonce, every fresh anvil gets the same one. */
export async function deployEcho(url: string): Promise<string> {
  const hash = await result<string>(url, 'eth_sendTransaction', [{ from: DEV_ADDRESS, data: DEPLOY_BYTECODE }]);
  return (await minedReceipt(url, hash)).contractAddress!;
}

/** One call to the Echo contract (one log whose data is `data`); with `mined`, returns once it is in a block. */
export async function echo(url: string, address: string, data: string, mined = true): Promise<string> {
  const hash = await result<string>(url, 'eth_sendTransaction', [{ from: DEV_ADDRESS, to: address, data }]);
  if (mined) await minedReceipt(url, hash);
  return hash;
}
