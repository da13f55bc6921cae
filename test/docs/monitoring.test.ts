import t from 'tap';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { scrape } from '../support/exposition.js';
import { evmChain, gatewayFor } from '../support/gateway.js';

const dashboard = JSON.parse(readFileSync(new URL('../../docs/monitoring/grafana-dashboard.json', import.meta.url), 'utf8')) as {
  panels: Array<{ type: string; title: string; targets?: Array<{ expr: string }> }>;
  templating: { list: Array<{ definition?: string }> };
};
const alerts = parse(readFileSync(new URL('../../docs/monitoring/alerts.yml', import.meta.url), 'utf8')) as {
  groups: Array<{ rules: Array<{ alert: string; expr: string }> }>;
};

/** The metric names a PromQL expression reads: ours, and the library's process and Node metrics. */
const metricNames = (expr: string): string[] => [...expr.matchAll(/\b(?:chaingate|nodejs|process)_[a-z0-9_]+\b/g)].map((m) => m[0]);

const dashboardExprs = [
  ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((tg) => ({ where: `panel "${p.title}"`, expr: tg.expr }))),
  ...dashboard.templating.list.flatMap((v) => (v.definition ? [{ where: 'a dashboard variable', expr: v.definition }] : [])),
];
const alertExprs = alerts.groups.flatMap((g) => g.rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })));

t.test('every metric the dashboard and the alert rules name is one the daemon exports', async (t) => {
  const { gateway } = await gatewayFor(t, { chains: { devnet: evmChain(['http://127.0.0.1:1'], 31337) } });
  const exported = await scrape(gateway.metricsPort!);
  const known = (name: string): boolean => {
    if (exported.types.has(name)) return true;
    // A histogram's series are its name with _bucket, _sum and _count.
    const base = name.replace(/_(bucket|sum|count)$/, '');
    return base !== name && exported.types.get(base) === 'histogram';
  };
  const used = [...dashboardExprs, ...alertExprs];
  t.ok(used.length > 20, `${used.length} expressions read`);
  for (const { where, expr } of used) {
    const names = metricNames(expr);
    t.ok(names.length > 0, `${where} reads a metric`);
    for (const name of names) t.ok(known(name), `${where}: ${name} is exported`);
  }
});

t.test('the alert rules cover what the operations guide promises', async (t) => {
  t.same(alerts.groups.flatMap((g) => g.rules.map((r) => r.alert)).sort(), [
    'ChaingateConfigReloadFailed',
    'ChaingateConnectionsRefused',
    'ChaingateEventLoopLag',
    'ChaingateHigh5xxRatio',
    'ChaingateLedgerFlushFailing',
    'ChaingateLimitTableFull',
    'ChaingateNoUpstreamInRotation',
    'ChaingateUpstreamLagging',
    'ChaingateUpstreamWrongChain',
    'ChaingateWorkerRestarting',
  ]);
  const panels = dashboard.panels.filter((p) => p.type === 'timeseries');
  t.ok(panels.length >= 15, `the dashboard has ${panels.length} panels`);
});
