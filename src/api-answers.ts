/**
 * The shapes of the management API's answers (`/api/dashboard/...`, docs/api.md), in one place for the
 * server that builds them and the dashboard page that reads them (dashboard/src/api.ts imports these
 * types): a field renamed on one side fails the other's type check. Types only, importing nothing, so the
 * page's build (no Node types) can read this file.
 */

/** `GET /api/dashboard/chains`: one configured chain and its keyless public URLs. */
export interface ChainAnswer {
  slug: string;
  name: string;
  kind: 'evm' | 'beacon';
  chain_id: number | null;
  public_https_url: string;
  public_wss_url: string | null;
}

/** An endpoint as listed: never its key, which is shown once, at creation. */
export interface EndpointAnswer {
  id: string;
  name: string | null;
  network: string;
  key_prefix: string;
  /** ISO 8601, UTC. */
  created_at: string;
}

/** `POST /api/dashboard/endpoints`: the endpoint with its key and URLs, shown this once. */
export interface CreatedEndpointAnswer extends EndpointAnswer {
  api_key: string;
  https_url: string;
  wss_url: string | null;
}

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
  /** Method pattern → requests per second per key (`plans.<plan>.method_limits`); {} when none. */
  method_limits: Record<string, number>;
}

/** `GET /api/dashboard/account`. */
export interface AccountAnswer {
  id: number;
  name: string;
  plan: PlanView;
  ru_balance: number;
}

/** Requests counted, RU debited, and requests that failed or were refused (status not 0). */
export interface UsageFigures {
  requests: number;
  ru: number;
  errors: number;
}

/** `GET /api/dashboard/endpoints/stats`. */
export interface UsageStats {
  totals: UsageFigures;
  /** Per JSON-RPC method (or Beacon route), most RU first. */
  methods: Array<UsageFigures & { method: string }>;
  /**
   * Points in time order, only periods with usage (a gap means none). `t` is the period's start in
   * unix seconds (UTC). Usage older than the minute (or hour) retention is kept only per hour (or
   * day), so a finer interval shows it at that coarser start.
   */
  series: Array<UsageFigures & { t: number }>;
  /**
   * The errors by status, most first: the HTTP status of a refusal or failure (401, 402, 429, 502...) or
   * the JSON-RPC code (negative) of an error answered with HTTP 200. Successes are not listed.
   */
  statuses: Array<{ status: number; requests: number }>;
}
