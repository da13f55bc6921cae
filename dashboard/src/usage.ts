import { type Account, type Chain, type Endpoint, type Usage, api } from './api.js';
import { barChart } from './chart.js';
import { byId, copyButton, fillRows, formatNumber, h } from './dom.js';
import { endpointLabel } from './endpoints.js';
import { statusMeaning, statusName } from './error-meanings.js';
import { setUpFailures } from './failures.js';
import { firstCall } from './networks.js';
import { ROLE_TEXT } from './roles.js';
import { formatMs, formatRate, setUpQuality } from './usage-quality.js';

/** What the usage view needs from the page. */
export interface UsageContext {
  account: () => Account | null;
  chains: () => Chain[];
  endpoints: () => Endpoint[];
  failed: (err: unknown, where: HTMLElement) => void;
}

type Range = 'hour' | 'day' | 'month';

/** Each period the page offers: how wide one point is, how many points, and how it is said. */
const RANGES: Readonly<Record<Range, { interval: 'minute' | 'hour' | 'day'; step: number; points: number; per: string; span: string }>> = {
  hour: { interval: 'minute', step: 60, points: 60, per: 'per minute', span: 'the last hour' },
  day: { interval: 'hour', step: 3600, points: 24, per: 'per hour', span: 'the last day' },
  month: { interval: 'day', step: 86_400, points: 30, per: 'per day', span: 'the last 30 days' },
};

/**
 * The periods to show, oldest first, the last one holding now. The API lists only periods with usage;
 * the others are drawn as zeros.
 */
export function periods(range: Range, nowSeconds: number): { from: number; to: number; times: number[] } {
  const { step, points } = RANGES[range];
  const to = (Math.floor(nowSeconds / step) + 1) * step;
  const from = to - points * step;
  return { from, to, times: Array.from({ length: points }, (_, i) => from + i * step) };
}

export function setUpUsage(ctx: UsageContext): { show: (endpointId?: string) => Promise<void>; refresh: () => Promise<void> } {
  const scope = byId<HTMLSelectElement>('usage-scope');
  const range = byId<HTMLSelectElement>('usage-range');
  const totals = byId('usage-totals');
  const notice = byId('usage-empty');
  const requests = barChart(byId('chart-requests'), 'requests', '#1f6fb2');
  const ru = barChart(byId('chart-ru'), 'RU', '#b25f1f');
  const quality = setUpQuality(() => void refresh());
  const failures = setUpFailures(ctx.failed);
  let generation = 0;

  scope.addEventListener('change', () => void refresh());
  range.addEventListener('change', () => void refresh());
  byId('usage-refresh').addEventListener('click', () => void refresh());

  function showAccount(): void {
    const account = ctx.account();
    if (account === null) return;
    const { plan } = account;
    const limit = (n: number | null): string => (n === null ? 'none' : formatNumber(n));
    byId('balance').textContent = `${formatNumber(account.ru_balance)} RU`;
    byId('account-name').textContent = account.name;
    byId('account-role').textContent = ROLE_TEXT[account.role];
    byId('plan-name').textContent = `“${plan.name}”`;
    byId('plan-rps').textContent = limit(plan.rps);
    byId('plan-ru-per-second').textContent = limit(plan.ru_per_second);
    byId('plan-endpoints').textContent = `${formatNumber(ctx.endpoints().length)} of ${limit(plan.max_endpoints)}`;
    byId('plan-max-batch').textContent = formatNumber(plan.max_batch);
    byId('plan-connections').textContent = formatNumber(plan.max_connections_per_key);
    byId('plan-denied').textContent = plan.denied_methods.length === 0 ? 'none' : plan.denied_methods.join(', ');
    const limited = Object.entries(plan.method_limits).map(([pattern, rps]) => `${pattern} ${formatNumber(rps)}/s`);
    byId('plan-method-limits').textContent = limited.length === 0 ? 'none' : limited.join(', ');
  }

  function fillScope(chosen: string): void {
    const options = ctx.endpoints().map((e) => h('option', { value: e.id }, `${endpointLabel(e)} (${e.network})`));
    scope.replaceChildren(h('option', { value: '' }, 'All endpoints'), ...options);
    scope.value = ctx.endpoints().some((e) => e.id === chosen) ? chosen : '';
  }

  /** What to do first, when there is nothing to show; else how fresh the figures are. */
  function showNotice(usage: Usage, span: string): void {
    notice.classList.toggle('first-steps', usage.totals.requests === 0);
    if (usage.totals.requests > 0) {
      notice.replaceChildren('Calls show here within a second or so of their answer: press Refresh to see the latest.');
      return;
    }
    const endpoints = ctx.endpoints();
    const chains = ctx.chains();
    const network = endpoints[0]?.network;
    const chain = chains.find((c) => c.slug === network) ?? chains.find((c) => c.kind === 'evm') ?? chains[0];
    const url = (chain?.public_https_url ?? '').replace(/\/public$/, '/<API_KEY>');
    const curl = firstCall(chain?.kind ?? 'evm', url);
    const made =
      endpoints.length === 0
        ? h('li', {}, h('a', { href: '#endpoints' }, 'Create an endpoint'), ': its key and URLs are shown once.')
        : h('li', {}, `Create an endpoint: done, you have ${endpoints.length}.`);
    notice.replaceChildren(
      h('strong', {}, `No calls in ${span} yet.`),
      h(
        'ol',
        {},
        made,
        h(
          'li',
          {},
          'Send it a first call, with its key in place of <API_KEY>:',
          h(
            'div',
            { class: 'value' },
            h('code', {}, curl),
            copyButton('the first call', () => curl),
          ),
        ),
      ),
    );
  }

  async function refresh(): Promise<void> {
    const mine = ++generation;
    const name: Range = Object.hasOwn(RANGES, range.value) ? (range.value as Range) : 'day';
    const chosen = RANGES[name];
    const { from, to, times } = periods(name, Math.floor(Date.now() / 1000));
    const id = scope.value === '' ? undefined : scope.value;
    const method = quality.method();
    void failures.show(id);
    let usage: Usage;
    try {
      usage = await api.usage({
        ...(id === undefined ? {} : { id }),
        ...(method === undefined ? {} : { method }),
        from,
        to,
        interval: chosen.interval,
      });
    } catch (err) {
      ctx.failed(err, totals);
      return;
    }
    // A slower answer to an earlier choice must not overwrite a later one.
    if (mine !== generation) return;
    const at = new Map(usage.series.map((p) => [p.t, p]));
    requests.show(
      times,
      times.map((t) => at.get(t)?.requests ?? 0),
    );
    ru.show(
      times,
      times.map((t) => at.get(t)?.ru ?? 0),
    );
    quality.show(times, usage, chosen.per, chosen.span);
    byId('requests-caption').textContent = `Requests ${chosen.per}, ${chosen.span}`;
    byId('ru-caption').textContent = `RU ${chosen.per}, ${chosen.span}`;
    const { totals: sum } = usage;
    totals.textContent = `${formatNumber(sum.requests)} ${sum.requests === 1 ? 'request' : 'requests'}, ${formatNumber(sum.ru)} RU and ${formatNumber(sum.errors)} ${sum.errors === 1 ? 'error' : 'errors'} in ${chosen.span}`;
    showNotice(usage, chosen.span);
    const methodRows = usage.methods
      .slice(0, 10)
      .map((m) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, h('code', {}, m.method)),
          h('td', { class: 'num' }, formatNumber(m.requests)),
          h('td', { class: 'num' }, formatNumber(m.ru)),
          h('td', { class: 'num' }, formatNumber(m.errors)),
          h('td', { class: 'num' }, formatRate(m.success_rate)),
          h('td', { class: 'num' }, formatMs(m.latency_ms.p50)),
          h('td', { class: 'num' }, formatMs(m.latency_ms.p95)),
        ),
      );
    fillRows(byId('methods').querySelector('tbody')!, methodRows, 'No calls in this period.', 7);
    const statusRows = usage.statuses.map((s) =>
      h(
        'tr',
        {},
        h('th', { scope: 'row' }, statusName(s.status)),
        h('td', {}, statusMeaning(s.status)),
        h('td', { class: 'num' }, formatNumber(s.requests)),
      ),
    );
    fillRows(byId('statuses').querySelector('tbody')!, statusRows, 'No errors in this period.', 3);
  }

  return {
    refresh,
    async show(endpointId) {
      showAccount();
      fillScope(endpointId ?? scope.value);
      await refresh();
    },
  };
}
