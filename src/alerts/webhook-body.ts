/**
 * A webhook's registration as the API reads it (`POST /api/dashboard/webhooks`): every problem at once, each
 * naming its field. The URL's host is resolved here and every address checked (url-guard.ts), so a webhook
 * that could never be delivered is refused when it is made, with the reason.
 */
import { WEBHOOK_EVENTS, type WebhookEvent, type WebhookSpec } from '../accounts/webhook-store.js';
import { MAX_RU } from '../tenancy/owners.js';
import { checkHost, hostOf, parseWebhookUrl } from './url-guard.js';

/** The fields a registration may carry; any other is refused by name. */
export const WEBHOOK_FIELDS = ['url', 'events', 'secret', 'balance_below_ru', 'refused_per_minute', 'error_rate_above'] as const;

/** A secret's length, in characters: enough to resist guessing, short enough for a header's HMAC key. */
export const SECRET_LENGTH = { min: 16, max: 256 } as const;

/** The threshold each event needs. */
const THRESHOLD_OF: Record<WebhookEvent, (typeof WEBHOOK_FIELDS)[number]> = {
  balance_low: 'balance_below_ru',
  key_refused: 'refused_per_minute',
  error_rate: 'error_rate_above',
};

export type FieldProblem = { field: string; message: string };

const wholeNumber = (v: unknown, min: number, max: number): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max;

/** The webhook `body` asks for, or every problem of it. */
export async function readWebhookBody(
  body: Record<string, unknown>,
  allowPrivate: boolean,
): Promise<{ ok: true; spec: WebhookSpec } | { ok: false; problems: FieldProblem[] }> {
  const problems: FieldProblem[] = Object.keys(body)
    .filter((k) => !(WEBHOOK_FIELDS as readonly string[]).includes(k))
    .map((field) => ({ field, message: `is not a webhook field (fields: ${WEBHOOK_FIELDS.join(', ')})` }));
  const { url, events, secret } = body;
  if (typeof url !== 'string') problems.push({ field: 'url', message: 'is required: the https:// URL deliveries are POSTed to' });
  else {
    const parsed = parseWebhookUrl(url, allowPrivate);
    const problem = parsed.ok ? await checkHost(hostOf(parsed.url), allowPrivate) : parsed.problem;
    if (problem !== null) problems.push({ field: 'url', message: problem });
  }
  const known = WEBHOOK_EVENTS.join(', ');
  const asked: WebhookEvent[] = [];
  if (!Array.isArray(events) || events.length === 0) problems.push({ field: 'events', message: `must be a non-empty list of: ${known}` });
  else {
    for (const e of events) {
      if (!(WEBHOOK_EVENTS as readonly unknown[]).includes(e))
        problems.push({ field: 'events', message: `${JSON.stringify(e)} is not one of ${known}` });
      else if (asked.includes(e as WebhookEvent)) problems.push({ field: 'events', message: `${e} is given twice` });
      else asked.push(e as WebhookEvent);
    }
  }
  if (typeof secret !== 'string' || secret.length < SECRET_LENGTH.min || secret.length > SECRET_LENGTH.max) {
    problems.push({ field: 'secret', message: `must be ${SECRET_LENGTH.min} to ${SECRET_LENGTH.max} characters (it signs each delivery)` });
  }
  const { balance_below_ru: below, refused_per_minute: refused, error_rate_above: rate } = body;
  if (below !== undefined && !wholeNumber(below, 1, MAX_RU))
    problems.push({ field: 'balance_below_ru', message: `must be a whole number of RU from 1 to ${MAX_RU}` });
  if (refused !== undefined && !wholeNumber(refused, 1, 1_000_000_000))
    problems.push({ field: 'refused_per_minute', message: 'must be a whole number from 1' });
  if (rate !== undefined && !(typeof rate === 'number' && rate > 0 && rate <= 1)) {
    problems.push({ field: 'error_rate_above', message: 'must be a share above 0 and at most 1 (0.05: 5 % of the calls)' });
  }
  for (const e of asked) {
    const field = THRESHOLD_OF[e];
    if (body[field] === undefined) problems.push({ field, message: `is required with the event ${e}` });
  }
  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    spec: {
      url: url as string,
      events: asked,
      secret: secret as string,
      balanceBelowRu: asked.includes('balance_low') ? (below as number) : null,
      refusedPerMinute: asked.includes('key_refused') ? (refused as number) : null,
      errorRateAbove: asked.includes('error_rate') ? (rate as number) : null,
    },
  };
}
