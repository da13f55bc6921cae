/**
 * The shapes of the management API's answers (`/api/dashboard/...`, docs/api.md), in one place for the
 * server that builds them and the dashboard page that reads them (dashboard/src/api.ts imports these
 * types): a field renamed on one side fails the other's type check. Types only but `isoTime`, the form of
 * their times, importing nothing, so the page's build (no Node types) can read this file.
 */

/**
 * Unix seconds as ISO 8601 (`2026-11-29T20:14:42.000Z`): every time the management API answers, the webhooks'
 * bodies and the CLI's --json print.
 */
export function isoTime(unixSeconds: number): string {
  return new Date(unixSeconds * 1000).toISOString();
}

/** `GET /api/dashboard/chains`: one configured chain and its keyless public URLs. */
export interface ChainAnswer {
  slug: string;
  name: string;
  kind: 'evm' | 'beacon';
  chain_id: number | null;
  public_https_url: string;
  public_wss_url: string | null;
}

/** A public key a signed token must be signed by, as the owner registered it: a JWK or a PEM (SPKI), one of them. */
export interface JwtKeyAnswer {
  id: string;
  alg: 'ES256' | 'RS256' | 'EdDSA';
  jwk?: Record<string, unknown>;
  pem?: string;
}

/**
 * An endpoint's restrictions (docs/api.md, "Endpoint restrictions"), as `POST` and `PATCH
 * /api/dashboard/endpoints` take them and `GET` shows them: a list is null when it restricts nothing.
 */
export interface EndpointSettingsAnswer {
  allowed_origins: string[] | null;
  allow_no_origin: boolean;
  allowed_ips: string[] | null;
  allowed_methods: string[] | null;
  allowed_contracts: string[] | null;
  key_in_path: boolean;
  jwt_keys: JwtKeyAnswer[] | null;
  jwt_max_lifetime_s: number;
}

/** An endpoint as listed, with its restrictions: never its key, which is shown once, at creation or rotation. */
export interface EndpointAnswer extends EndpointSettingsAnswer {
  id: string;
  name: string | null;
  network: string;
  key_prefix: string;
  /** ISO 8601, UTC. */
  created_at: string;
  /** During a rotation's grace: the previous key's first characters, still accepted until `previous_key_expires_at`; else null. */
  previous_key_prefix: string | null;
  /** ISO 8601, UTC: when the previous key stops working; null when no key is in its grace. */
  previous_key_expires_at: string | null;
}

/** `POST /api/dashboard/endpoints`: the endpoint with its key and URLs, shown this once. */
export interface CreatedEndpointAnswer extends EndpointAnswer {
  api_key: string;
  https_url: string;
  wss_url: string | null;
}

/** `POST /api/dashboard/endpoints/rotate?id=`: the new key and its URLs, shown this once, and the old key's end. */
export interface RotatedKeyAnswer {
  api_key: string;
  https_url: string;
  wss_url: string | null;
  /** ISO 8601, UTC: when the previous key stops working; null when it stopped at once (`grace_s: 0`). */
  previous_key_expires_at: string | null;
}

/** One problem of a refused body (400 `bad_request`), naming its field: `error.fields` beside `error.message`. */
export interface FieldProblem {
  field: string;
  message: string;
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
  /** The calling key's role: admin (everything), developer (endpoints and usage) or viewer (read only). */
  role: 'admin' | 'developer' | 'viewer';
}

/** A webhook as its owner sees it: never its secret. */
export interface WebhookAnswer {
  id: string;
  url: string;
  events: Array<'balance_low' | 'key_refused' | 'error_rate'>;
  balance_below_ru: number | null;
  refused_per_minute: number | null;
  error_rate_above: number | null;
  created_at: string;
}

/** One delivery of a webhook, newest first: `pending` while it is being retried. */
export interface DeliveryAnswer {
  id: number;
  event: 'balance_low' | 'key_refused' | 'error_rate';
  created_at: string;
  attempts: number;
  outcome: 'pending' | 'delivered' | 'failed';
  /** The receiver's HTTP status in the last attempt; null when none answered. */
  http_status: number | null;
  /** Why the last attempt failed; null when delivered. */
  error: string | null;
  last_attempt_at: string | null;
}

/** Latency percentiles in ms of the successful calls timed (null each when none was). */
export interface LatencyFigures {
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

/** Requests counted, RU debited, and requests that failed or were refused (status not 0). */
export interface UsageFigures {
  requests: number;
  ru: number;
  errors: number;
  /** (requests − errors) / requests, 0 to 1 (4 decimals); null when there were no requests. */
  success_rate: number | null;
  /**
   * p50/p95/p99 of the successful calls' time in the gateway (from the request read to the answer), from
   * histograms merged across minutes, hours and days (subscription deliveries are not timed).
   */
  latency_ms: LatencyFigures;
}

/** One row of `GET /api/dashboard/endpoints/failures`: a failed or refused call, never its params nor its key. */
export interface FailureAnswer {
  /** When it was answered, unix seconds. */
  time: number;
  /** The JSON-RPC method or Beacon route. */
  method: string;
  /** The HTTP status answered (200 for a JSON-RPC error). */
  http_status: number;
  /** The JSON-RPC error code answered; null when there was none (a Beacon route). */
  code: number | null;
  /** The error table's code (docs/api.md), whose meaning the dashboard shows; null for a node's own error. */
  error: string | null;
  /** The error's message: the error table's, never text a client or a node chose. */
  message: string;
  /** The name of the node that failed the call; null when no node did. */
  upstream: string | null;
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
