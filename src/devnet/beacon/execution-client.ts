/**
 * The devnet beacon node's view of anvil: JSON-RPC over HTTP with global fetch, single calls and
 * batches (one round trip for a range of blocks). Every call gives up after `timeoutMs` and when the
 * node stops.
 */

/** An execution block as eth_getBlockByNumber returns it (hashes only for transactions). */
export interface ExecutionBlock {
  number: string;
  hash: string;
  parentHash: string;
  stateRoot: string;
  receiptsRoot: string;
  logsBloom: string;
  miner: string;
  mixHash?: string;
  gasLimit: string;
  gasUsed: string;
  timestamp: string;
  extraData: string;
  baseFeePerGas?: string;
  transactions: string[];
  withdrawals?: Array<{ index: string; validatorIndex: string; address: string; amount: string }>;
  blobGasUsed?: string;
  excessBlobGas?: string;
  requestsHash?: string;
}

export interface ExecutionClient {
  chainId(): Promise<number>;
  /** The block at `tag` ("latest" or a number); undefined when the node has no such block. */
  block(tag: number | 'latest'): Promise<ExecutionBlock | undefined>;
  blockByHash(hash: string): Promise<ExecutionBlock | undefined>;
  /** Blocks `from`..`to` inclusive, in order, in one batch; a missing block ends the list early. */
  blocks(from: number, to: number): Promise<ExecutionBlock[]>;
  /** Raw signed transactions (0x hex) for the given hashes, in order. */
  rawTransactions(hashes: string[]): Promise<string[]>;
}

interface RpcAnswer {
  id?: number;
  result?: unknown;
  error?: { code: number; message: string };
}

const hexQuantity = (n: number): string => '0x' + n.toString(16);

export function createExecutionClient(url: string, stopSignal: AbortSignal, timeoutMs = 5000): ExecutionClient {
  let nextId = 1;

  async function post(payload: unknown): Promise<unknown> {
    // A timer of its own, not AbortSignal.timeout() inside AbortSignal.any(): on Node 20 a garbage
    // collection can drop the timeout signal a composite holds before it fires, and the request (and
    // with it the poll that follows anvil) then waits forever. The answer's body is read within it too.
    const giveUp = new AbortController();
    const timer = setTimeout(() => giveUp.abort(new Error(`execution node did not answer within ${timeoutMs} ms`)), timeoutMs);
    const onStop = (): void => giveUp.abort(stopSignal.reason);
    if (stopSignal.aborted) onStop();
    else stopSignal.addEventListener('abort', onStop, { once: true });
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(payload),
        signal: giveUp.signal,
      });
      if (!res.ok) throw new Error(`execution node answered HTTP ${res.status}`);
      return await res.json();
    } finally {
      clearTimeout(timer);
      stopSignal.removeEventListener('abort', onStop);
    }
  }

  function resultOf(answer: RpcAnswer | undefined, method: string): unknown {
    if (!answer) throw new Error(`execution node left ${method} unanswered`);
    if (answer.error) throw new Error(`execution node: ${method}: ${answer.error.message}`);
    return answer.result;
  }

  async function call(method: string, params: unknown[]): Promise<unknown> {
    return resultOf((await post({ jsonrpc: '2.0', id: nextId++, method, params })) as RpcAnswer, method);
  }

  async function batch(method: string, paramsList: unknown[][]): Promise<unknown[]> {
    if (paramsList.length === 0) return [];
    const first = nextId;
    nextId += paramsList.length;
    const answers = (await post(paramsList.map((params, i) => ({ jsonrpc: '2.0', id: first + i, method, params })))) as RpcAnswer[];
    if (!Array.isArray(answers)) throw new Error(`execution node answered a ${method} batch with a non-array`);
    const byId = new Map(answers.map((a) => [a.id, a]));
    return paramsList.map((_, i) => resultOf(byId.get(first + i), method));
  }

  return {
    async chainId() {
      return Number(await call('eth_chainId', []));
    },
    async block(tag) {
      const b = await call('eth_getBlockByNumber', [tag === 'latest' ? tag : hexQuantity(tag), false]);
      return (b ?? undefined) as ExecutionBlock | undefined;
    },
    async blockByHash(hash) {
      const b = await call('eth_getBlockByHash', [hash, false]);
      return (b ?? undefined) as ExecutionBlock | undefined;
    },
    async blocks(from, to) {
      const out: ExecutionBlock[] = [];
      // Batches of 256 keep each request small; anvil answers a batch in one go.
      for (let start = from; start <= to; start += 256) {
        const end = Math.min(to, start + 255);
        const params = Array.from({ length: end - start + 1 }, (_, i) => [hexQuantity(start + i), false]);
        for (const b of await batch('eth_getBlockByNumber', params)) {
          if (!b) return out;
          out.push(b as ExecutionBlock);
        }
      }
      return out;
    },
    async rawTransactions(hashes) {
      const raw = await batch(
        'eth_getRawTransactionByHash',
        hashes.map((h) => [h]),
      );
      return raw.map((r) => (typeof r === 'string' ? r : '0x'));
    },
  };
}
