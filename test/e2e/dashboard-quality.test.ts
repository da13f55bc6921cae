/**
 * Issue 36 §1, §2, §5 in a real headless Chromium in front of a gateway and a real anvil: known traffic
 * (eth_getBalance held 120 ms by a proxy before the node, fast eth_chainId) is charted as p50/p95 latency
 * and success rate, per endpoint and per method; forced failures (the proxy answers eth_getCode with HTTP
 * 500, an unknown method refused) are listed newest first with the failing node's name and each code's
 * meaning from the error table. The API's answers are checked first, then what the page draws of them.
 */
import t from 'tap';
import type { FailureAnswer, UsageStats } from '../../src/api-answers.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { browserFor } from '../support/browser.js';
import { countingProxy } from '../support/counting-proxy.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';
import { waitFor } from '../support/wait-for.js';

const HELD_MS = 120;
const node = await anvilFor(t);
const proxy = await countingProxy(t, node.url);
proxy.delay((call) => (call.method === 'eth_getBalance' ? HELD_MS : undefined));
proxy.fail((call) => call.method === 'eth_getCode');
const g = await gatewayFor(t, {
  server: { default_chain: 'devnet' },
  chains: { devnet: { ...evmChain([]), upstreams: [{ url: proxy.url, name: 'node-a' }] } },
});
const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('quality', 'free', 1_000_000);
const browser = await browserFor(t);

async function api<T>(path: string, init: RequestInit = {}): Promise<{ status: number; data: T }> {
  const res = await fetch(`${g.base}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${owner.managementKey}`, 'content-type': 'application/json' },
  });
  return { status: res.status, data: ((await res.json()) as { data: T }).data };
}

t.test('latency and success per endpoint and method; recent failures with their node and meaning', async (t) => {
  const created = await api<{ id: string; api_key: string }>('/api/dashboard/endpoints', {
    method: 'POST',
    body: JSON.stringify({ network: 'devnet', name: 'quality' }),
  });
  t.equal(created.status, 201);
  const { id, api_key: key } = created.data;
  const url = `${g.base}/devnet/v1/rpc/${key}`;
  const address = '0x0000000000000000000000000000000000000001';
  for (let i = 0; i < 10; i++) t.equal((await rpc(url, 'eth_getBalance', [address, 'latest'])).status, 200);
  for (let i = 0; i < 10; i++) t.equal((await rpc(url, 'eth_chainId')).status, 200);
  for (let i = 0; i < 3; i++) t.match((await rpc(url, 'eth_getCode', [address, 'latest'])).json, { error: { code: -32603 } });
  t.match((await rpc(url, 'eth_notAMethod')).json, { error: { code: -32601 } });

  // The ledger writes within its flush interval: wait for every call to be counted.
  const day = `/api/dashboard/endpoints/stats?id=${id}&interval=hour`;
  await waitFor(async () => (await api<UsageStats>(day)).data.totals.requests === 24);
  const all = (await api<UsageStats>(day)).data;
  t.equal(all.totals.errors, 4);
  t.equal(all.totals.success_rate, 0.8333, '20 of 24');
  const balance = all.methods.find((m) => m.method === 'eth_getBalance')!;
  t.ok(
    balance.latency_ms.p50! >= HELD_MS && balance.latency_ms.p50! <= 200,
    `eth_getBalance p50 ${balance.latency_ms.p50} ms: held ${HELD_MS} ms`,
  );
  t.equal(balance.success_rate, 1);
  const chainId = all.methods.find((m) => m.method === 'eth_chainId')!;
  t.ok(chainId.latency_ms.p95! < HELD_MS, `eth_chainId p95 ${chainId.latency_ms.p95} ms: not held`);
  t.match(
    all.methods.find((m) => m.method === 'eth_getCode'),
    { success_rate: 0, latency_ms: { p50: null } },
    'failures untimed',
  );
  const one = (await api<UsageStats>(`${day}&method=eth_getBalance`)).data;
  t.same(
    one.methods.map((m) => m.method),
    ['eth_getBalance'],
    '?method= keeps one method',
  );
  t.same(one.totals.latency_ms, balance.latency_ms, "its totals are the method's row");

  const failures = await api<FailureAnswer[]>(`/api/dashboard/endpoints/failures?id=${id}&limit=10`);
  t.equal(failures.status, 200);
  t.equal(failures.data.length, 4);
  t.match(failures.data[0], { method: 'eth_notAMethod', http_status: 200, code: -32601, error: 'method_not_found', upstream: null });
  for (const f of failures.data.slice(1)) {
    t.match(f, { method: 'eth_getCode', http_status: 502, code: -32603, error: 'upstream_error', upstream: 'node-a' });
  }
  t.ok(JSON.stringify(failures.data).indexOf(address.slice(2)) === -1, 'never the params');
  t.equal((await api(`/api/dashboard/endpoints/failures?id=${id}&limit=0`)).status, 400, 'limit is 1 to 1000');
  t.equal((await api('/api/dashboard/endpoints/failures?id=ep_unknown')).status, 404);

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  t.teardown(() => context.close());
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (err) => consoleErrors.push(`uncaught: ${err.message}`));
  await page.goto(`${g.base}/dashboard`);
  await page.getByLabel('Management key').fill(owner.managementKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#usage-totals', { hasText: '24 requests' }).waitFor();
  await page.locator('#failures-note', { hasText: 'Choose an endpoint' }).waitFor();
  await page.locator('#usage-quality', { hasText: 'Success 83.3 %' }).waitFor();

  // Pixels of a colour in a chart's canvas: a line drawn from the figures, not an empty frame.
  const drawn = (box: string, rgb: [number, number, number]): Promise<number> =>
    page.evaluate(`(() => {
      const c = document.querySelector('${box} canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4)
        if (Math.abs(d[i] - ${rgb[0]}) < 8 && Math.abs(d[i + 1] - ${rgb[1]}) < 8 && Math.abs(d[i + 2] - ${rgb[2]}) < 8 && d[i + 3] > 200) n++;
      return n;
    })()`);
  t.ok((await drawn('#chart-latency', [0xb2, 0x1f, 0x4d])) > 0, 'the p95 line is drawn');
  t.ok((await drawn('#chart-success', [0x2e, 0x7d, 0x32])) > 0, 'the success rate is drawn');
  const methodsTable = await page.locator('#methods tbody tr', { hasText: 'eth_getBalance' }).textContent();
  t.match(methodsTable, /100\.0 %/, 'the method row shows its success rate');

  await page.getByLabel('Endpoint', { exact: true }).selectOption(id);
  await page.locator('#failures tbody tr', { hasText: 'node-a' }).first().waitFor();
  const rows = await page.locator('#failures tbody tr').allTextContents();
  t.equal(rows.length, 4);
  t.match(rows[0], /eth_notAMethod.*-32601.*Method not found/, 'a refusal: its meaning, no node');
  t.match(rows[1], /eth_getCode.*502.*-32603.*Upstream node error.*node-a/, 'a node failure: its meaning and the node');

  await page.getByLabel('Method', { exact: true }).selectOption('eth_getBalance');
  await page.locator('#latency-caption', { hasText: 'of eth_getBalance' }).waitFor();
  const quality = (await page.locator('#usage-quality').textContent()) ?? '';
  const p50 = Number(/p50 ([\d.]+) ms/.exec(quality)?.[1]);
  t.ok(p50 >= HELD_MS && p50 <= 200, `the page shows eth_getBalance's p50: ${quality}`);
  t.match(quality, /Success 100\.0 %/);
  await page.setViewportSize({ width: 360, height: 780 });
  t.equal(await page.evaluate('document.documentElement.scrollWidth'), 360, 'no sideways scroll at 360 px');
  t.same(consoleErrors, [], 'no console error');
});
