import type { ChainRuntime } from '../upstreams/chain.js';
import { type AnswerSink, type ForwardCall, forwardCall } from './forward.js';

/**
 * Sends one forwarded call to an upstream of the chain. The upstream is the chain's choice; the sink's
 * `fail` carries the label of the upstream that failed, for the log.
 */
export function routeCall(chain: ChainRuntime, method: string, paramsJson: string, idText: string, sink: AnswerSink & { failedUpstream?: string }): ForwardCall {
  const upstream = chain.pickUpstream();
  sink.failedUpstream = upstream.label;
  return forwardCall(upstream, chain.timeoutMs, method, paramsJson, idText, sink);
}
