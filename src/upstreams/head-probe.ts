/**
 * Reads one node's head for the prober: an execution node's block number (eth_blockNumber), a beacon node's
 * head slot (GET /eth/v1/beacon/headers/head → data.header.message.slot).
 *
 * A probe answer is a few dozen bytes; one larger than MAX_PROBE_ANSWER_BYTES is not a head and is dropped
 * unread, so a node (or anything else at its address) that answers every request with megabytes costs a
 * probe nothing but its first chunk. Probes go out exclusive: alone on their socket, so dropping one (too
 * large, or given up by the prober) closes that socket instead of reading its answer to the end, and no
 * client call ever waits behind a probe.
 */
import { carriesId, gatewayIdText } from './call-ids.js';
import type { HttpUpstream, RequestHandle, UpstreamRequest } from './http-client.js';

/** A probe answer larger than this is refused (a beacon header answer is under 1 KB). */
export const MAX_PROBE_ANSWER_BYTES = 16_384;

const JSON_HEADERS: Array<[string, string]> = [
  ['content-type', 'application/json'],
  ['accept', 'application/json'],
];
const QUANTITY = /^0x(?:0|[1-9a-f][0-9a-f]{0,12})$/i;
const DECIMAL = /^(?:0|[1-9][0-9]{0,15})$/;

/** Reads a node's head; rejects when it does not answer with one within timeoutMs or `signal` aborts. */
export type ReadHead = (upstream: HttpUpstream, timeoutMs: number, signal: AbortSignal) => Promise<number>;

/**
 * One small JSON answer: resolves with it parsed, rejects on a transport failure, a non-2xx status (the Error then
 * has the node's `status`), an answer over `maxBytes` (default MAX_PROBE_ANSWER_BYTES; the Error has `tooLarge`)
 * or not JSON, and, given
 * `sentId`, an answer that does not carry that JSON-RPC id (its socket is then closed: its answers are out of step).
 */
export function fetchSmallJson(
  upstream: HttpUpstream,
  req: UpstreamRequest,
  signal: AbortSignal,
  sentId?: string,
  maxBytes = MAX_PROBE_ANSWER_BYTES,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new Error('aborted'));
      return;
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    let status = 0;
    let handle: RequestHandle | null = null;
    let settled = false;
    const settle = (err: Error | null, value?: unknown): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve(value);
    };
    const giveUp = (err: Error): void => {
      handle?.abort();
      settle(err);
    };
    const onAbort = (): void => giveUp(new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    handle = upstream.request(req, {
      onHead(s) {
        status = s;
        if (s < 200 || s > 299) giveUp(statusError(s));
      },
      onData(chunk) {
        bytes += chunk.length;
        if (bytes > maxBytes) giveUp(Object.assign(new Error(`answer larger than ${maxBytes} bytes`), { tooLarge: true }));
        else chunks.push(chunk);
        return true;
      },
      onEnd() {
        if (status < 200 || status > 299) return settle(statusError(status));
        let answer: unknown;
        try {
          answer = JSON.parse(Buffer.concat(chunks, bytes).toString());
        } catch {
          return settle(new Error('answer is not JSON'));
        }
        if (sentId === undefined || carriesId(answer, sentId)) return settle(null, answer);
        handle?.distrust();
        settle(new Error("answer carries another call's id"));
      },
      onError(err) {
        settle(new Error(`${err.kind}: ${err.message}`));
      },
    });
    // The request may have failed synchronously (a closed upstream) before `handle` was set.
    if (settled) handle.abort();
  });
}

/** A node's answer outside 2xx, with its status. */
const statusError = (status: number): Error & { status: number } => Object.assign(new Error(`HTTP ${status}`), { status });

/**
 * A parameterless JSON-RPC probe (eth_blockNumber, eth_chainId): resolves with its answer's `result` (undefined for
 * an error object). It carries the gateway's call id in turn, like every call of the gateway's, and an answer with
 * another id rejects: a balancer mixing answers could otherwise hand eth_chainId an eth_blockNumber result, which
 * reads as a chain id.
 */
export async function probeRpc(upstream: HttpUpstream, method: string, timeoutMs: number, signal: AbortSignal): Promise<unknown> {
  const sentId = gatewayIdText();
  const body = `{"jsonrpc":"2.0","id":${sentId},"method":"${method}","params":[]}`;
  const answer = await fetchSmallJson(
    upstream,
    { method: 'POST', headers: JSON_HEADERS, body, timeoutMs, exclusive: true },
    signal,
    sentId,
  );
  return (answer as { result?: unknown }).result;
}

/** eth_blockNumber over the node's HTTP. */
export const readEvmHead: ReadHead = async (upstream, timeoutMs, signal) => {
  const result = await probeRpc(upstream, 'eth_blockNumber', timeoutMs, signal);
  if (typeof result !== 'string' || !QUANTITY.test(result)) throw new Error('eth_blockNumber answer holds no block number');
  return parseInt(result, 16);
};

/** The head slot from GET /eth/v1/beacon/headers/head. */
export const readBeaconHead: ReadHead = async (upstream, timeoutMs, signal) => {
  const answer = await fetchSmallJson(
    upstream,
    { method: 'GET', path: '/eth/v1/beacon/headers/head', headers: JSON_HEADERS.slice(1), timeoutMs, exclusive: true },
    signal,
  );
  const slot = (answer as { data?: { header?: { message?: { slot?: unknown } } } } | null)?.data?.header?.message?.slot;
  if (typeof slot !== 'string' || !DECIMAL.test(slot)) throw new Error('beacon header answer holds no slot');
  return Number(slot);
};
