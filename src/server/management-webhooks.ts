/**
 * The management routes of an owner's webhooks (issue 36 §3, docs/api.md "Webhooks"):
 * `GET|POST|DELETE /api/dashboard/webhooks` and `GET /api/dashboard/webhooks/deliveries?id=`. The body is read
 * by alerts/webhook-body.ts, which names each problem's field; deliveries are made by alerts/alert-watch.ts.
 */
import type { AccountStore, OwnerRecord } from '../accounts/account-store.js';
import { DELIVERIES_KEPT, type DeliveryRecord, type WebhookRecord } from '../accounts/webhook-store.js';
import { readWebhookBody } from '../alerts/webhook-body.js';
import { type DeliveryAnswer, isoTime, type WebhookAnswer } from '../api-answers.js';
import type { Config } from '../config/schema.js';
import { fail, fromStore, queryParam, type Reply, refuseFields, send } from './management-io.js';

export function webhookView(w: WebhookRecord): WebhookAnswer {
  return {
    id: w.id,
    url: w.url,
    events: [...w.events],
    balance_below_ru: w.balanceBelowRu,
    refused_per_minute: w.refusedPerMinute,
    error_rate_above: w.errorRateAbove,
    created_at: isoTime(w.createdAt),
  };
}

function deliveryView(d: DeliveryRecord): DeliveryAnswer {
  return {
    id: d.id,
    event: d.event,
    created_at: isoTime(d.at),
    attempts: d.attempts,
    outcome: d.outcome,
    http_status: d.httpStatus,
    error: d.error,
    last_attempt_at: d.lastAttemptAt === null ? null : isoTime(d.lastAttemptAt),
  };
}

/** The webhook's id from `?id=` (or a DELETE body's `id`), or the refusal already sent. */
function webhookId(query: string, body: Record<string, unknown> | string | null, reply: Reply): string | null {
  const id = queryParam(query, 'id');
  if (id === null) fail(reply, 'bad_request', "'id' is given more than once");
  else if (id !== undefined && id !== '') return id;
  else if (body !== null && typeof body !== 'string' && typeof body.id === 'string') return body.id;
  else fail(reply, 'bad_request', "'id' is required (query ?id=)");
  return null;
}

/** Routes one webhooks request of an owner whose key may make it (management-roles.ts has said so). */
export async function handleWebhooks(
  config: Config,
  accounts: AccountStore,
  owner: OwnerRecord,
  route: string,
  verb: string,
  query: string,
  body: Promise<Record<string, unknown> | string> | null,
  reply: Reply,
): Promise<void> {
  const store = accounts.webhooks;
  if (route === '/api/dashboard/webhooks/deliveries') {
    const id = webhookId(query, null, reply);
    if (id === null) return;
    const found = await fromStore(() => store.deliveries(owner.id, id, DELIVERIES_KEPT));
    if (found === null) return fail(reply, 'not_found', `No webhook ${id}`);
    return send(reply, 200, found.map(deliveryView));
  }
  if (verb === 'GET') return send(reply, 200, (await fromStore(() => store.list(owner.id))).map(webhookView));
  const given = await body!;
  if (verb === 'DELETE') {
    const id = webhookId(query, given, reply);
    if (id === null) return;
    if (!(await fromStore(() => store.delete(owner.id, id)))) return fail(reply, 'not_found', `No webhook ${id}`);
    return send(reply, 200, { id, deleted: true });
  }
  if (typeof given === 'string') return fail(reply, 'bad_request', given);
  const read = await readWebhookBody(given, config.webhooks.allow_private);
  if (!read.ok) return refuseFields(reply, read.problems);
  const max = config.webhooks.max_per_owner;
  const made = await fromStore(() => store.create(owner.id, read.spec, max));
  if (made.kind === 'refused') return fail(reply, 'forbidden', `Webhook limit reached: ${max} per owner (webhooks.max_per_owner)`);
  send(reply, 201, webhookView(made.webhook));
}
