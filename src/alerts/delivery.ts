/**
 * One delivery of a webhook: a JSON body POSTed with its signature, retried with backoff (1 s, doubling, at
 * most 5 min apart) until it is answered 2xx or `webhooks.retry_for_s` has passed since the first attempt.
 * Each attempt's outcome is written to the delivery's row, which the owner reads through the API. A redirect
 * is not followed (it is a failure, naming where it pointed): it could lead past the address check. The row
 * keeps the body and its sender's lease, so a delivery its sender left (a stop, a crash) is resumed by the next
 * sender to look (delivery-resume.ts).
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { WebhookStore } from '../accounts/webhook-store.js';
import { checkHost, guardedLookup, hostOf, parseWebhookUrl } from './url-guard.js';
import { signDelivery } from './signature.js';

/** The first retry's delay and the longest between two attempts, in ms. */
export const BACKOFF_MS = { first: 1000, max: 300_000 } as const;

/** The delay before attempt `attempt + 1` (attempt counts from 1). */
export function backoffMs(attempt: number): number {
  return Math.min(BACKOFF_MS.max, BACKOFF_MS.first * 2 ** (attempt - 1));
}

/** What one attempt gave: the receiver's status, or why none came. */
export type AttemptResult = { status: number } | { error: string };

export interface DeliveryOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  retryForS: number;
  /** Clock in ms; default Date.now. */
  now?: () => number;
  /** One attempt; default `postOnce` (the tests of backoff give their own). */
  post?: (
    url: string,
    headers: Record<string, string>,
    body: string,
    o: { allowPrivate: boolean; timeoutMs: number },
  ) => Promise<AttemptResult>;
}

/** The body of a response is read and dropped, at most this much (a receiver's answer is not kept). */
const MAX_ANSWER_BYTES = 65_536;

/** One POST, its address checked by the connection's own lookup; never rejects. */
export async function postOnce(
  urlText: string,
  headers: Record<string, string>,
  body: string,
  o: { allowPrivate: boolean; timeoutMs: number },
): Promise<AttemptResult> {
  const parsed = parseWebhookUrl(urlText, o.allowPrivate);
  if (!parsed.ok) return { error: `the URL ${parsed.problem}` };
  const url = parsed.url;
  // An IP literal is connected to without a lookup: it is checked here instead.
  const literal = await checkHost(hostOf(url), o.allowPrivate);
  if (literal !== null) return { error: `refused: ${literal}` };
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        lookup: guardedLookup(o.allowPrivate) as never,
        timeout: o.timeoutMs,
      },
      (res) => {
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_ANSWER_BYTES) res.destroy();
        });
        const status = res.statusCode ?? 0;
        const done = (): void => resolve({ status });
        res.on('end', done);
        res.on('close', done);
        res.on('error', done);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${o.timeoutMs} ms`)));
    req.on('error', (err) => resolve({ error: err.message }));
    req.end(body);
  });
}

/** Beyond an attempt's due time and its timeout, how long (s) a sender's lease on a delivery lasts. */
export const LEASE_GRACE_S = 30;

/**
 * Until when (unix s) a sender holds a delivery whose next attempt starts in `aheadMs`: the attempt's timeout
 * and LEASE_GRACE_S after it (a slow store, clocks a little apart), so a live sender is never taken over.
 */
export function leaseUntilS(nowMs: number, aheadMs: number, timeoutMs: number): number {
  return Math.ceil((nowMs + aheadMs + timeoutMs) / 1000) + LEASE_GRACE_S;
}

/** A delivery to send, new or resumed after its sender stopped (alerts/delivery-resume.ts). */
export interface DeliveryTarget {
  id: number;
  url: string;
  secret: string;
  event: string;
  /** The JSON body, the same in every attempt. */
  body: string;
  /** The first attempt's time (ms): the retry window runs from it. */
  startedMs: number;
  /** Attempts made so far (0 for a new delivery). */
  attempts: number;
  /** When the next attempt is due (ms): a resumed delivery waits out its backoff first. */
  dueMs: number;
}

/**
 * Sends the target's body to the webhook and records each attempt in its row, retrying with backoff, while
 * sender `by` holds the delivery (each update renews its lease). `stopped` ends the retries (at the daemon's
 * stop: the row stays `pending` with its attempts, let go so that the next sender resumes it). `lost`: another
 * sender took it over (this one was slower than its lease), which then sends it.
 */
export async function deliver(
  store: WebhookStore,
  target: DeliveryTarget,
  by: string,
  o: DeliveryOptions,
  stopped: () => boolean,
  wait: (ms: number) => Promise<void>,
): Promise<'delivered' | 'failed' | 'stopped' | 'lost'> {
  const now = o.now ?? Date.now;
  const post = o.post ?? postOnce;
  const stop = async (): Promise<'stopped'> => {
    await store.releaseDelivery(target.id, by);
    return 'stopped';
  };
  if (target.dueMs > now()) await wait(target.dueMs - now());
  if (stopped()) return stop();
  for (let attempt = target.attempts + 1; ; attempt++) {
    const timestamp = String(Math.floor(now() / 1000));
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'chaingate-webhooks',
      'x-chaingate-event': target.event,
      'x-chaingate-delivery': String(target.id),
      'x-chaingate-timestamp': timestamp,
      'x-chaingate-signature': signDelivery(target.secret, timestamp, target.body),
    };
    const result = await post(target.url, headers, target.body, { allowPrivate: o.allowPrivate, timeoutMs: o.timeoutMs });
    const ok = 'status' in result && result.status >= 200 && result.status < 300;
    const delay = backoffMs(attempt);
    const last = ok || now() + delay - target.startedMs > o.retryForS * 1000;
    const error = ok ? null : 'error' in result ? result.error : `answered HTTP ${result.status}`;
    const kept = await store.updateDelivery(target.id, by, {
      attempts: attempt,
      outcome: ok ? 'delivered' : last ? 'failed' : 'pending',
      httpStatus: 'status' in result ? result.status : null,
      error,
      lastAttemptAt: Math.floor(now() / 1000),
      leaseUntil: last ? 0 : leaseUntilS(now(), delay, o.timeoutMs),
    });
    if (!kept) return 'lost';
    if (last) return ok ? 'delivered' : 'failed';
    await wait(delay);
    if (stopped()) return stop();
  }
}
