/**
 * The one place an answered request is counted: `chaingate_requests_total` and its duration, the access
 * log line, the error line of a 5xx the gateway decided, and `chaingate_refusals_total` for a refusal made
 * before any node. Metering passes every answered call through here (settleCall and countRefusal in
 * admission.ts), and the transports call it only for refusals of a whole request, which never reach
 * metering (a bad key, a body too large, one that does not parse).
 */
import { performance } from 'node:perf_hooks';
import { type ErrorCode, ERRORS } from '../errors.js';
import { isAllowedMethod } from '../jsonrpc/methods.js';
import type { ChainMetrics, RefusalReason, Transport } from '../metrics/registry.js';
import { KEY_PREFIX_LENGTH } from '../tenancy/keys.js';
import type { GatewayContext } from './context.js';
import type { ChainRuntime } from '../chain/runtime.js';

/**
 * Why a request is refused before a node: an error table code, or a connection limit (answered as
 * rate_limited, but counted apart).
 */
export type RefusalCode = ErrorCode | 'too_many_connections' | 'no_upstream';

/** Each code that refuses a request before a node, as `chaingate_refusals_total{reason}` names it. */
const REFUSAL_REASONS: Readonly<Partial<Record<RefusalCode, RefusalReason>>> = {
  too_many_connections: 'too_many_connections',
  no_upstream: 'no_upstream',
  unauthorized: 'invalid_key',
  insufficient_balance: 'insufficient_ru',
  rate_limited: 'rate_limited',
  body_too_large: 'too_large',
  batch_too_large: 'too_large',
  unsupported_media_type: 'bad_content_type',
  parse_error: 'invalid_request',
  invalid_request: 'invalid_request',
  bad_request: 'invalid_request',
  method_not_found: 'method_not_allowed',
  node_local_method: 'method_not_allowed',
  method_not_in_plan: 'method_not_allowed',
  method_not_allowed: 'method_not_allowed',
  invalid_params: 'invalid_params',
  not_found: 'not_found',
  shutting_down: 'shutting_down',
  store_unavailable: 'store_unavailable',
  limits_unavailable: 'limits_unavailable',
  // An endpoint's restrictions (fences/): one reason for every kind; the answers' statuses tell them apart.
  origin_not_allowed: 'fenced',
  ip_not_allowed: 'fenced',
  method_not_allowed_for_key: 'fenced',
  contract_not_allowed: 'fenced',
  token_refused: 'fenced',
  owner_suspended: 'owner_suspended',
};

/** The refusal reason of an error code; null for an error that is not a refusal (a node's failure). */
export function refusalReason(code: RefusalCode): RefusalReason | null {
  return REFUSAL_REASONS[code] ?? null;
}

/** The error table row a refusal is answered with. */
export function refusalError(code: RefusalCode): (typeof ERRORS)[ErrorCode] {
  return ERRORS[refusalErrorCode(code)];
}

/** The error table's row a refusal is answered with (and its failure recorded as). */
export function refusalErrorCode(code: RefusalCode): ErrorCode {
  return code === 'too_many_connections' ? 'rate_limited' : code === 'no_upstream' ? 'upstream_error' : code;
}

/** The `method` label of a JSON-RPC call: an allowlisted name, else `other` (never a client's string). */
export function methodLabel(method: string): string {
  return isAllowedMethod(method) ? method : 'other';
}

/**
 * One request's counting: its chain, transport, start and (for the access log) its key's prefix. Made once
 * per HTTP request with its Caller; a WebSocket connection keeps one and restarts its clock per message.
 * A class: one object per request, no closure.
 */
export class RequestTally {
  constructor(
    readonly ctx: GatewayContext,
    readonly slug: string,
    readonly metrics: ChainMetrics,
    /** Set to `sse` once a Beacon request turns out to open an event stream. */
    public transport: Transport,
    public startedAt: number,
    /** The endpoint key's prefix (what `chaingate endpoint list` shows) when keyed and the access log is on. */
    readonly keyPrefix: string | undefined,
  ) {}

  /**
   * Counts one answered call. `label` is already low-cardinality (a Beacon route template, `other`) or, for
   * JSON-RPC, is made so here. `reason` says why a 5xx was decided, for its log line. Returns the call's time
   * in ms, for the usage rows to keep the same one clock read.
   */
  answered(method: string, status: number, reason?: string, label?: string): number {
    const ctx = this.ctx;
    const name = label ?? (this.transport === 'http' || this.transport === 'ws' ? methodLabel(method) : method);
    const ms = performance.now() - this.startedAt;
    const seconds = ms / 1000;
    this.metrics.request(this.transport, name, status, seconds);
    const access = ctx.config.log;
    if (access.access && (access.access_sample >= 1 || Math.random() < access.access_sample)) {
      ctx.log.info('request', {
        chain: this.slug,
        transport: this.transport,
        method: name,
        status,
        duration_ms: Math.round(seconds * 1e6) / 1e3,
        ...(this.keyPrefix !== undefined ? { key: this.keyPrefix } : {}),
      });
    }
    // A 5xx the gateway decided: logged when it starts, then summed up while it repeats (an outage would
    // otherwise write a line per call), once per chain, method and status.
    if (status >= 500)
      ctx.failedAnswers.report(
        `${this.slug} ${name} ${status}`,
        'requests answered with a 5xx',
        { chain: this.slug, method: name, status },
        { reason: reason ?? 'unknown' },
      );
    return ms;
  }

  /** Counts a refusal made before any node (its answer is counted by answered()). */
  refused(code: RefusalCode): void {
    const reason = refusalReason(code);
    if (reason !== null) this.ctx.metrics.refusal(reason);
  }

  /** A whole request refused with `code` before a node: the refusal once, and `items` answers of its status. */
  refusedWhole(code: RefusalCode, items: number, message?: string): void {
    this.refused(code);
    const row = refusalError(code);
    for (let i = 0; i < items; i++) this.answered('other', row.http, message ?? row.message, 'other');
  }
}

/** The tally of a request on `slug`, its clock started now. */
export function tallyFor(ctx: GatewayContext, chain: ChainRuntime, transport: Transport, key: string | null): RequestTally {
  const prefix = key !== null && ctx.config.log.access ? key.slice(0, KEY_PREFIX_LENGTH) : undefined;
  return new RequestTally(ctx, chain.config.slug, chain.metrics, transport, performance.now(), prefix);
}
