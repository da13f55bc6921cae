import type { DeliveryAnswer, WebhookAnswer } from '../../src/api-answers.js';
import { ApiError, data } from './api.js';
import { announce, byId, h } from './dom.js';

/**
 * The alerts view (issue 36 §3): the owner's webhooks, each with its last deliveries and how they went, and
 * (for an admin: teams.css hides the rest) a form to add one and a button to delete each. The API checks
 * everything; a refused field is shown with the API's own words.
 */
export interface WebhooksContext {
  failed: (err: unknown, where: HTMLElement) => void;
}

const EVENT_TEXT: Readonly<Record<WebhookAnswer['events'][number], string>> = {
  balance_low: 'balance below a threshold',
  key_refused: 'a key refused too often in a minute',
  error_rate: 'errors above a share of calls',
};

const webhooksApi = {
  list: () => data<WebhookAnswer[]>('GET', '/api/dashboard/webhooks'),
  create: (body: Record<string, unknown>) => data<WebhookAnswer>('POST', '/api/dashboard/webhooks', body),
  remove: (id: string) => data<{ id: string }>('DELETE', `/api/dashboard/webhooks?id=${encodeURIComponent(id)}`),
  deliveries: (id: string) => data<DeliveryAnswer[]>('GET', `/api/dashboard/webhooks/deliveries?id=${encodeURIComponent(id)}`),
};

function thresholds(w: WebhookAnswer): string {
  const parts: string[] = [];
  if (w.balance_below_ru !== null) parts.push(`balance below ${w.balance_below_ru} RU`);
  if (w.refused_per_minute !== null) parts.push(`more than ${w.refused_per_minute} refusals a minute`);
  if (w.error_rate_above !== null) parts.push(`errors above ${Math.round(w.error_rate_above * 1000) / 10} %`);
  return parts.join(', ');
}

function deliveryRow(d: DeliveryAnswer): HTMLTableRowElement {
  const how = d.outcome === 'delivered' ? `delivered (HTTP ${d.http_status ?? '?'})` : d.outcome === 'pending' ? 'retrying' : 'failed';
  return h(
    'tr',
    { class: `delivery-${d.outcome}` },
    h('td', { 'data-label': 'When' }, h('time', { datetime: d.created_at }, new Date(d.created_at).toLocaleString())),
    h('td', { 'data-label': 'Event' }, d.event),
    h('td', { 'data-label': 'Outcome' }, how),
    h('td', { 'data-label': 'Attempts', class: 'num' }, String(d.attempts)),
    h('td', { 'data-label': 'Last error', class: 'wrap' }, d.error ?? '–'),
  );
}

export function setUpWebhooks(ctx: WebhooksContext): { show: () => Promise<void> } {
  const form = byId<HTMLFormElement>('webhook-form');
  const list = byId('webhooks-list');
  const formError = byId('webhook-error');

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void create();
  });

  async function create(): Promise<void> {
    formError.textContent = '';
    const events = [...form.querySelectorAll<HTMLInputElement>('input[name="event"]:checked')].map((i) => i.value);
    const body: Record<string, unknown> = {
      url: byId<HTMLInputElement>('webhook-url').value.trim(),
      events,
      secret: byId<HTMLInputElement>('webhook-secret').value,
    };
    const number = (id: string): number => Number(byId<HTMLInputElement>(id).value);
    if (events.includes('balance_low')) body.balance_below_ru = number('webhook-balance');
    if (events.includes('key_refused')) body.refused_per_minute = number('webhook-refused');
    if (events.includes('error_rate')) body.error_rate_above = number('webhook-error-rate') / 100;
    try {
      await webhooksApi.create(body);
    } catch (err) {
      if (err instanceof ApiError && err.fields.length > 0)
        formError.textContent = err.fields.map((f) => `${f.field}: ${f.message}`).join('; ');
      else ctx.failed(err, formError);
      return;
    }
    byId<HTMLInputElement>('webhook-secret').value = '';
    announce('Webhook added');
    await show();
  }

  async function remove(w: WebhookAnswer, where: HTMLElement): Promise<void> {
    try {
      await webhooksApi.remove(w.id);
    } catch (err) {
      ctx.failed(err, where);
      return;
    }
    announce('Webhook deleted');
    await show();
  }

  async function card(w: WebhookAnswer): Promise<HTMLElement> {
    const error = h('p', { class: 'error', role: 'alert' });
    const del = h('button', { type: 'button', class: 'danger needs-admin', 'aria-label': `Delete the webhook to ${w.url}` }, 'Delete');
    del.addEventListener('click', () => void remove(w, error));
    let deliveries: DeliveryAnswer[] = [];
    try {
      deliveries = await webhooksApi.deliveries(w.id);
    } catch (err) {
      ctx.failed(err, error);
    }
    const rows = deliveries.slice(0, 10).map(deliveryRow);
    const table =
      rows.length === 0
        ? h('p', { class: 'muted' }, 'No deliveries yet: one is sent when an event happens.')
        : h(
            'div',
            { class: 'table-wrap' },
            h(
              'table',
              { class: 'stack-narrow deliveries' },
              h('caption', { class: 'sr-only' }, `Last deliveries to ${w.url}`),
              h(
                'thead',
                {},
                h('tr', {}, ...['When', 'Event', 'Outcome', 'Attempts', 'Last error'].map((c) => h('th', { scope: 'col' }, c))),
              ),
              h('tbody', {}, ...rows),
            ),
          );
    return h(
      'article',
      { class: 'card webhook', 'data-id': w.id },
      h('h2', { class: 'wrap' }, h('code', {}, w.url)),
      h('p', {}, w.events.map((e) => EVENT_TEXT[e]).join('; '), h('br'), h('span', { class: 'muted' }, thresholds(w))),
      table,
      error,
      del,
    );
  }

  async function show(): Promise<void> {
    let hooks: WebhookAnswer[];
    try {
      hooks = await webhooksApi.list();
    } catch (err) {
      ctx.failed(err, list);
      return;
    }
    if (hooks.length === 0) {
      list.replaceChildren(h('p', { class: 'muted' }, 'No webhooks yet.'));
      return;
    }
    list.replaceChildren(...(await Promise.all(hooks.map(card))));
  }

  return { show };
}
