/**
 * An owner's webhooks and their deliveries (issue 36 §3), in the SQLite file or the fleet's PostgreSQL: both
 * answer alike (test/accounts/webhook-store.test.ts runs one table of cases against each). What is checked of
 * a webhook (its URL, events and thresholds) is the caller's (alerts/webhook-body.ts); this only keeps it.
 *
 * The alerts are claimed here, so each is sent once whatever the threads and instances: the claims are
 * conditional updates (`claimMinute`, `setBalanceLow`), which one writer wins. So is each delivery under
 * way: its sender holds a lease it renews with each attempt and lets go at a stop; a delivery whose lease
 * ended (its sender stopped or crashed) is taken over by one sender (`claimDelivery`), which resumes it.
 */

/** The events an owner may ask to be told of. */
export const WEBHOOK_EVENTS = ['balance_low', 'key_refused', 'error_rate'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** The deliveries kept per webhook: the newest; older ones are deleted as new ones are recorded. */
export const DELIVERIES_KEPT = 50;

/** A webhook as it is registered. */
export interface WebhookSpec {
  url: string;
  events: WebhookEvent[];
  /** Signs each delivery (HMAC-SHA256); never shown again. */
  secret: string;
  balanceBelowRu: number | null;
  refusedPerMinute: number | null;
  /** A share of the minute's calls, above 0 and at most 1. */
  errorRateAbove: number | null;
}

/** A stored webhook; `secret` is read only by the sender, never answered to the owner. */
export interface WebhookRecord extends WebhookSpec {
  /** `wh_` and 16 base32 characters. */
  id: string;
  ownerId: number;
  /** Unix seconds. */
  createdAt: number;
  /** Whether a balance_low alert was sent and the balance has not been above the threshold since. */
  balanceLow: boolean;
}

export type DeliveryOutcome = 'pending' | 'delivered' | 'failed';

/** One delivery: its event, when it was made (unix s), how many attempts so far and how the last one went. */
export interface DeliveryRecord {
  id: number;
  webhookId: string;
  event: WebhookEvent;
  at: number;
  attempts: number;
  outcome: DeliveryOutcome;
  /** The receiver's HTTP status in the last attempt; null when none answered. */
  httpStatus: number | null;
  /** What went wrong in the last attempt (a refused address, a timeout, a status); null when delivered. */
  error: string | null;
  lastAttemptAt: number | null;
}

/**
 * A delivery left `pending` by a sender that stopped or crashed (its lease ended): what another sender needs
 * to resume it, the webhook's URL and secret with it. `body` is null for a row of an older version.
 */
export interface StalledDelivery extends DeliveryRecord {
  body: string | null;
  url: string;
  secret: string;
  webhookDeleted: boolean;
}

/** A sender's hold on a delivery: its id (random per sender) and until when (unix s) the others keep off. */
export interface DeliveryClaim {
  by: string;
  until: number;
}

/** An attempt's outcome, and the lease it leaves (0 when the delivery is done or let go). */
export type DeliveryUpdate = Pick<DeliveryRecord, 'attempts' | 'outcome' | 'httpStatus' | 'error' | 'lastAttemptAt'> & {
  leaseUntil: number;
};

/** One row of an owner's usage in one minute, summed over methods. */
export interface MinuteCount {
  endpointId: string;
  /** The minute's start, unix s. */
  t: number;
  /** 0: success; else the HTTP status of a refusal or failure, or a JSON-RPC error code (negative). */
  status: number;
  requests: number;
}

/** The claims of a minute's alert: the column that remembers the last minute alerted. */
export type MinuteClaim = 'key_refused' | 'error_rate';

export interface WebhookStore {
  /** The owner's live webhooks, oldest first. */
  list(ownerId: number): Promise<WebhookRecord[]>;
  /** A new webhook, or `refused` when the owner has `max` already (the count and insert are one transaction). */
  create(ownerId: number, spec: WebhookSpec, max: number): Promise<{ kind: 'created'; webhook: WebhookRecord } | { kind: 'refused' }>;
  /** False when unknown, already deleted or another owner's: the same answer for all. */
  delete(ownerId: number, id: string): Promise<boolean>;
  /** The webhook's newest deliveries first, at most `limit`; null when the webhook is unknown or another owner's. */
  deliveries(ownerId: number, id: string, limit: number): Promise<DeliveryRecord[] | null>;
  /** Every live webhook of a live, unsuspended owner: what the sender watches. */
  watched(): Promise<WebhookRecord[]>;
  /** Marks minute `t` alerted for `claim`; true only for the one caller that moved it forward. */
  claimMinute(id: string, claim: MinuteClaim, t: number): Promise<boolean>;
  /** Sets whether the balance is low; true only for the one caller that changed it. */
  setBalanceLow(id: string, low: boolean): Promise<boolean>;
  /** The owner's usage per endpoint, minute and status from minute `fromT` on. */
  minuteCounts(ownerId: number, fromT: number): Promise<MinuteCount[]>;
  /**
   * Records a new delivery (pending, no attempt yet, claimed by its sender) with its body, made of its id,
   * pruning the webhook's beyond DELIVERIES_KEPT; its id.
   */
  addDelivery(webhookId: string, event: WebhookEvent, at: number, claim: DeliveryClaim, body: (id: number) => string): Promise<number>;
  /** The outcome of an attempt, if sender `by` still holds the delivery; false when another took it over. */
  updateDelivery(id: number, by: string, d: DeliveryUpdate): Promise<boolean>;
  /** Pending deliveries whose lease ended before `nowS`, oldest first, at most `limit`. */
  stalledDeliveries(nowS: number, limit: number): Promise<StalledDelivery[]>;
  /** Takes over a stalled delivery: true only for the one caller whose update still found its lease ended. */
  claimDelivery(id: number, nowS: number, claim: DeliveryClaim): Promise<boolean>;
  /** Lets a delivery go at a stop (its lease ends now), so the next sender to look resumes it at once. */
  releaseDelivery(id: number, by: string): Promise<void>;
}

/** A stored events list (comma-separated), the known ones only. */
export function storedEvents(text: string): WebhookEvent[] {
  return text.split(',').filter((e): e is WebhookEvent => (WEBHOOK_EVENTS as readonly string[]).includes(e));
}
