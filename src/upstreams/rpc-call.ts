import { carriesId, gatewayIdText } from './call-ids.js';
import type { HttpUpstream, RequestHandle } from './http-client.js';

/** A JSON-RPC error answered by the node itself (as opposed to a failure to reach it). */
export class NodeRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

const JSON_HEADERS: Array<[string, string]> = [['content-type', 'application/json']];

/**
 * One JSON-RPC call the gateway makes for itself (backfills, filters, probes): resolves with `result`,
 * rejects with a NodeRpcError for the node's error object, or an Error for a transport failure or an
 * answer that is another call's (its id not the one sent; its socket is then closed, as for forwarded
 * calls: filter polls answer clients from these). `signal` aborts the call.
 */
export function callUpstream(
  upstream: HttpUpstream,
  timeoutMs: number,
  method: string,
  params: unknown[],
  signal?: AbortSignal,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let status = 0;
    let handle: RequestHandle | null = null;
    const onAbort = (): void => {
      handle?.abort();
      reject(new Error('aborted'));
    };
    if (signal?.aborted) {
      reject(new Error('aborted'));
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    const sentId = gatewayIdText();
    const body = `{"jsonrpc":"2.0","id":${sentId},"method":${JSON.stringify(method)},"params":${JSON.stringify(params)}}`;
    handle = upstream.request(
      { method: 'POST', headers: JSON_HEADERS, body, timeoutMs },
      {
        onHead(s) {
          status = s;
        },
        onData(chunk) {
          chunks.push(chunk);
          return true;
        },
        onEnd() {
          signal?.removeEventListener('abort', onAbort);
          if (status < 200 || status > 299) {
            reject(new Error(`upstream answered HTTP ${status}`));
            return;
          }
          let answer: { id?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } };
          try {
            answer = JSON.parse(Buffer.concat(chunks).toString()) as typeof answer;
          } catch {
            reject(new Error('upstream answer is not JSON'));
            return;
          }
          if (!carriesId(answer, sentId)) {
            handle?.distrust();
            reject(new Error("upstream answer carries another call's id"));
          } else if (answer.error !== undefined) reject(new NodeRpcError(Number(answer.error.code), String(answer.error.message)));
          else resolve(answer.result);
        },
        onError(err) {
          signal?.removeEventListener('abort', onAbort);
          reject(new Error(`${err.kind}: ${err.message}`));
        },
      },
    );
  });
}
