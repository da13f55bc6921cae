/**
 * Deliveries a sender left `pending` (issue 36: nothing lost on a stop or a crash). A sender holds each
 * delivery it sends by a lease in the store, renewed with each attempt and let go at a stop; the sender's
 * start and each of its checks look for pending deliveries whose lease ended, take each over by a conditional
 * update (one sender wins, whatever the instances over one PostgreSQL) and go on with it where it was: the
 * same body, the next attempt when its backoff is due, until `webhooks.retry_for_s` from the first attempt.
 * One whose window has passed is marked `failed`, its error saying it was interrupted.
 */
import type { StalledDelivery, WebhookStore } from '../accounts/webhook-store.js';
import { backoffMs, type DeliveryTarget, leaseUntilS } from './delivery.js';

/** The stalled deliveries taken per look; the next check takes the rest. */
export const RESUME_BATCH = 100;

export interface ResumeDeps {
  store: WebhookStore;
  /** This sender's claim id. */
  by: string;
  now: () => number;
  settings: () => { retry_for_s: number; timeout_ms: number };
  closed: () => boolean;
  /** Sends a delivery taken over (delivery.ts `deliver`, tracked by the sender). */
  start: (target: DeliveryTarget) => void;
}

/** Why a stalled delivery is not resumed but failed; null when it is resumed. */
function endOf(d: StalledDelivery, nowMs: number, retryForS: number): string | null {
  const last = d.error === null ? '' : `; the last attempt: ${d.error}`;
  if (d.webhookDeleted) return `interrupted (its sender stopped while retrying), and the webhook was deleted since${last}`;
  if (nowMs > (d.at + retryForS) * 1000) {
    return `interrupted (its sender stopped while retrying) and not resumed within webhooks.retry_for_s (${retryForS} s)${last}`;
  }
  return null;
}

/** One look: each stalled delivery claimed, then resumed or failed. */
export async function resumeStalled(deps: ResumeDeps): Promise<void> {
  const nowMs = deps.now();
  const nowS = Math.floor(nowMs / 1000);
  const s = deps.settings();
  for (const d of await deps.store.stalledDeliveries(nowS, RESUME_BATCH)) {
    if (deps.closed()) return;
    const end = endOf(d, nowMs, s.retry_for_s);
    // A row of an older version has no body to send: left to its sender until its window has passed.
    if (end === null && d.body === null) continue;
    const dueMs = d.attempts === 0 ? nowMs : (d.lastAttemptAt ?? d.at) * 1000 + backoffMs(d.attempts);
    const until = leaseUntilS(nowMs, Math.max(0, dueMs - nowMs), s.timeout_ms);
    if (!(await deps.store.claimDelivery(d.id, nowS, { by: deps.by, until }))) continue;
    if (end !== null) {
      const { attempts, httpStatus, lastAttemptAt } = d;
      await deps.store.updateDelivery(d.id, deps.by, { attempts, outcome: 'failed', httpStatus, error: end, lastAttemptAt, leaseUntil: 0 });
      continue;
    }
    deps.start({
      id: d.id,
      url: d.url,
      secret: d.secret,
      event: d.event,
      body: d.body!,
      startedMs: d.at * 1000,
      attempts: d.attempts,
      dueMs,
    });
  }
}
