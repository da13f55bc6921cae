import type { Usage } from './api.js';
import { byId, formatNumber, h } from './dom.js';
import { lineChart } from './line-chart.js';

/** How a latency reads: ms with up to two decimals, `–` for none. */
export function formatMs(ms: number | null): string {
  if (ms === null) return '–';
  return `${ms >= 100 ? formatNumber(Math.round(ms)) : ms.toFixed(ms >= 10 ? 1 : 2)} ms`;
}

/** How a success rate reads: a percentage with one decimal, `–` for none. */
export function formatRate(rate: number | null): string {
  return rate === null ? '–' : `${(rate * 100).toFixed(1)} %`;
}

/**
 * The usage view's quality figures (issue 36): p50/p95 latency and success rate over the same periods as
 * requests and RU, for the endpoint chosen and, with the method select, one method. Its own module so that
 * usage.ts stays the view's frame.
 */
export function setUpQuality(onMethodChange: () => void): {
  /** The method chosen, undefined for all. */
  method(): string | undefined;
  /** Draws the charts from a stats answer over `times` (the view's periods), and lists its methods to choose from. */
  show(times: number[], usage: Usage, per: string, span: string): void;
} {
  const select = byId<HTMLSelectElement>('usage-method');
  const latency = lineChart(byId('chart-latency'), {
    unit: 'ms',
    lines: [
      { label: 'p50', color: '#1f6fb2' },
      { label: 'p95', color: '#b21f4d' },
    ],
  });
  const success = lineChart(byId('chart-success'), {
    unit: 'success',
    lines: [{ label: 'success rate', color: '#2e7d32' }],
    range: [0, 1.05],
    format: (v) => `${Math.round(v * 100)} %`,
  });
  select.addEventListener('change', onMethodChange);

  function listMethods(usage: Usage): void {
    // The list comes from an answer over every method; one filtered to a method would list only it.
    if (select.value !== '') return;
    const names = usage.methods.map((m) => m.method).sort();
    select.replaceChildren(h('option', { value: '' }, 'All methods'), ...names.map((m) => h('option', { value: m }, m)));
    select.value = '';
  }

  return {
    method: () => (select.value === '' ? undefined : select.value),
    show(times, usage, per, span) {
      listMethods(usage);
      const at = new Map(usage.series.map((p) => [p.t, p]));
      latency.show(times, [times.map((t) => at.get(t)?.latency_ms.p50 ?? null), times.map((t) => at.get(t)?.latency_ms.p95 ?? null)]);
      success.show(times, [times.map((t) => at.get(t)?.success_rate ?? null)]);
      const what = select.value === '' ? '' : ` of ${select.value}`;
      byId('latency-caption').textContent = `Latency${what} ${per} (p50, p95), ${span}`;
      byId('success-caption').textContent = `Success rate${what} ${per}, ${span}`;
      const { latency_ms: l, success_rate: rate } = usage.totals;
      byId('usage-quality').textContent =
        usage.totals.requests === 0
          ? ''
          : `Success ${formatRate(rate)}; latency p50 ${formatMs(l.p50)}, p95 ${formatMs(l.p95)}, p99 ${formatMs(l.p99)}`;
    },
  };
}
