import type { PlanView } from '../api-answers.js';
import type { Config } from '../config/schema.js';

/**
 * Read from the configuration at each call, so a reload that changes a plan shows at once. A plan the
 * configuration lost (the owner kept its name) answers nulls, never another plan's limits.
 */
export function planView(config: Config, name: string): PlanView {
  const plan = Object.hasOwn(config.plans, name) ? config.plans[name] : undefined;
  return {
    name,
    rps: plan?.rps ?? null,
    ru_per_second: plan?.ru_per_second ?? null,
    max_endpoints: plan?.max_endpoints ?? null,
    max_batch: config.server.max_batch,
    max_connections_per_key: config.websocket.max_connections_per_key,
    denied_methods: plan === undefined ? [] : [...plan.methods.deny],
    method_limits: { ...plan?.method_limits },
  };
}
