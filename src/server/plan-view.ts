import type { Config } from '../config/schema.js';

/** The limits an owner's keys meet, as `GET /api/dashboard/account` shows them under `plan`. */
export interface PlanView {
  name: string;
  /** Requests per second per key; null when the owner's plan is no longer configured. */
  rps: number | null;
  /** RU per second per key; null without that limit. */
  ru_per_second: number | null;
  /** Live endpoints the owner may have; null when the plan is no longer configured (creating one is then refused). */
  max_endpoints: number | null;
  /** Items in one batch (`server.max_batch`). */
  max_batch: number;
  /** Open WebSockets per key (`websocket.max_connections_per_key`). */
  max_connections_per_key: number;
  /** Method patterns the plan's keys may not call (`plans.<plan>.methods.deny`). */
  denied_methods: string[];
}

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
  };
}
