/**
 * The operator's method policy, at the allowlist step of planItem: before any parameter is read, a method of
 * the catalogue that the chain does not serve (chains.<slug>.methods) is -32601 naming the method, and one
 * the caller's plan denies (plans.<name>.methods, or public.methods on the keyless path) is
 * method_not_in_plan naming the plan. Either is answered by the gateway, free of RU. A name outside the
 * catalogue is left to the catalogue's own answer (checkCall), whatever the patterns say.
 */
import type { Config } from '../config/schema.js';
import { matchesAny } from '../jsonrpc/method-patterns.js';
import { isAllowedMethod } from '../jsonrpc/methods.js';
import type { ChainRuntime } from '../chain/runtime.js';
import type { Caller } from './admission.js';

/** A refusal by the policy, in the shape of checkCall's refusals. */
export interface MethodRefusal {
  kind: 'error';
  error: 'method_not_found' | 'method_not_in_plan';
  message: string;
}

/** Why the policy refuses `method` to `caller` on `chain`; null when it lets it through (the common case, looked at in a few compares). */
export function methodRefusal(config: Config, chain: ChainRuntime, caller: Caller, method: string): MethodRefusal | null {
  const onChain = chain.policy.refusal(method);
  if (onChain !== undefined) return isAllowedMethod(method) ? { kind: 'error', error: 'method_not_found', message: onChain } : null;
  const plan = caller.plan;
  const denied = plan !== null ? plan.methods.deny : config.public.methods.deny;
  if (!matchesAny(denied, method) || !isAllowedMethod(method)) return null;
  const message =
    plan !== null
      ? `${method} is not available on plan '${plan.name}'`
      : `${method} is not available on the public path (public.methods); call it with an API key whose plan includes it`;
  return { kind: 'error', error: 'method_not_in_plan', message };
}
