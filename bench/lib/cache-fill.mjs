// Filling the response cache before its hits are measured, so that the RSS figure is that of a gateway
// whose cache holds what it is configured to hold, not of an empty one. The entries are eth_getLogs
// answers over block ranges that all contain one block of logs: many distinct final calls from one
// block, with short keys and answers of a common size (8 logs of 1 KB, ~19 KB of JSON each).
import { Agent, request } from 'node:http';
import { anvilCall } from './anvil-calls.mjs';

/**
 * Creation code that emits 8 logs (LOG0) of 1,024 zero bytes each and deploys nothing:
 * PUSH1 8; JUMPDEST; PUSH2 1024; PUSH1 0; LOG0; PUSH1 1; SWAP1; SUB; DUP1; PUSH1 2; JUMPI; STOP.
 */
const LOG_INITCODE = '0x60085b6104006000a0600190038060025700';
/** Fill calls in flight at once, on as many keep-alive connections. */
const CONCURRENCY = 8;

/** Longest wait for the log transaction's receipt: anvil mines it on its own time, at once when idle. */
const RECEIPT_WAIT_MS = 10_000;

/** Sends a transaction that logs from anvil's dev account `from` and waits until it is mined; resolves its block number. */
export async function addLogBlock(port, from) {
  const tx = await anvilCall(port, 'eth_sendTransaction', [{ from, data: LOG_INITCODE, gas: '0xf4240' }]);
  const deadline = Date.now() + RECEIPT_WAIT_MS;
  let receipt = null;
  while (receipt === null && Date.now() < deadline) {
    receipt = await anvilCall(port, 'eth_getTransactionReceipt', [tx]);
    if (receipt === null) await new Promise((r) => setTimeout(r, 50));
  }
  if (receipt?.status !== '0x1' || receipt.logs.length === 0)
    throw new Error(`the log transaction failed: ${JSON.stringify(receipt).slice(0, 300)}`);
  return Number(receipt.blockNumber);
}

/**
 * The eth_getLogs calls (`{ body, result }`) over ranges [from, to] around `logBlock`, to at most
 * `lastFinal`, whose cache entries add up to at most `bytes`. An entry is counted as the cache counts
 * it (src/chain/response-cache.ts): the chain slug as JSON, the call's canonical JSON (these params
 * are canonical already: members sorted, hex lower-case), the result's JSON.
 */
export async function fillCalls({ port, chainSlug, logBlock, lastFinal, bytes }) {
  const hex = (n) => `0x${n.toString(16)}`;
  const result = await anvilCall(port, 'eth_getLogs', [{ fromBlock: hex(logBlock), toBlock: hex(logBlock) }]);
  const resultJson = JSON.stringify(result);
  const calls = [];
  let total = 0;
  for (let from = 1; from <= logBlock; from++) {
    for (let to = logBlock; to <= lastFinal; to++) {
      const params = [{ fromBlock: hex(from), toBlock: hex(to) }];
      const size = JSON.stringify(chainSlug).length + JSON.stringify(['eth_getLogs', ...params]).length + resultJson.length;
      if (total + size > bytes) return { calls, bytes: total };
      total += size;
      calls.push({ body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getLogs', params }), result: resultJson });
    }
  }
  return { calls, bytes: total };
}

function post(agent, url, body) {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Sends every call once, CONCURRENCY at a time; throws at the first answer that is not the expected result. */
async function sendAll(url, calls) {
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let next = 0;
  const worker = async () => {
    while (next < calls.length) {
      const { body, result } = calls[next++];
      const res = await post(agent, url, body);
      const answer = res.status === 200 ? JSON.parse(res.body) : null;
      if (JSON.stringify(answer?.result) !== result)
        throw new Error(`a fill call was answered HTTP ${res.status}: ${res.body.slice(0, 200)}`);
    }
  };
  try {
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  } finally {
    agent.destroy();
  }
}

/**
 * Sends the fill calls through the gateway at `url` twice: the first time they reach the node and
 * enter the cache, the second time none may (`countCalls` counts the node's eth_getLogs calls), which
 * shows that the cache holds all of them. Throws when it does not.
 */
export async function fillCache({ url, calls, countCalls }) {
  await sendAll(url, calls);
  const before = countCalls();
  await sendAll(url, calls);
  const missed = countCalls() - before;
  if (missed > 0) throw new Error(`the cache did not hold its fill: ${missed} of ${calls.length} calls asked again reached the node`);
}
