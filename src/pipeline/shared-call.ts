import type { GatewayContext } from '../server/context.js';
import type { ChainRuntime } from '../upstreams/chain.js';
import type { AnswerSink, ForwardCall } from './forward.js';
import type { Forward } from './plan.js';
import { routeCall } from './route-call.js';

/** A forwarded call as the pipeline makes it: the step where answers may be shared or reused sits here. */
export function sharedCall(_ctx: GatewayContext, chain: ChainRuntime, f: Forward, sink: AnswerSink & { failedUpstream?: string }): ForwardCall {
  return routeCall(chain, f.method, f.paramsJson, f.idText, sink);
}
