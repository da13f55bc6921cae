/**
 * The owners' dashboard in a real headless Chromium, in front of a gateway and a real anvil: a wrong key
 * refused with the API's message, sign-in by keyboard, the networks, an endpoint created (its key shown
 * once) and called from here with the URL the page showed, the call and its error in usage, the endpoint
 * deleted and its key refused. Every view is photographed at desktop width and at 360 px, into
 * .tap/screenshots/dashboard/ for people to look at. Along the way: the CSP and frame headers, no console
 * error, no request to another origin, the key in sessionStorage only, and no layout shift.
 */
import t, { type Test } from 'tap';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { browserFor } from '../support/browser.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';
import { freePort } from '../support/servers.js';

const SHOTS = fileURLToPath(new URL('../../.tap/screenshots/dashboard/', import.meta.url));
mkdirSync(SHOTS, { recursive: true });

const node = await anvilFor(t);
// A port chosen first, so the URLs the page shows (built from it) are the ones to call.
const port = await freePort();
const g = await gatewayFor(t, { server: { port, default_chain: 'devnet' }, chains: { devnet: evmChain([node.url]) } });
const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('dash', 'free', 1_000_000);
const browser = await browserFor(t);

/**
 * Both widths of one view, as `<step>-<name>-desktop.png` and `...-360.png`; at 360 px the page must not
 * scroll sideways (a wide table scrolls in its own box).
 */
async function photograph(t: Test, page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `${SHOTS}${name}-desktop.png`, fullPage: true });
  await page.setViewportSize({ width: 360, height: 780 });
  t.equal(await page.evaluate('document.documentElement.scrollWidth'), 360, `${name}: no sideways scroll at 360 px`);
  await page.screenshot({ path: `${SHOTS}${name}-360.png`, fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
}

t.test('an owner signs in, makes an endpoint, calls it, sees the usage and deletes it', async (t) => {
  // The Copy buttons write to the clipboard, which a page may read back only with these permissions.
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, permissions: ['clipboard-read', 'clipboard-write'] });
  t.teardown(() => context.close());
  const page = await context.newPage();
  const clipboard = async (): Promise<unknown> => page.evaluate('navigator.clipboard.readText()');
  const consoleErrors: string[] = [];
  const foreign: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (err) => consoleErrors.push(`uncaught: ${err.message}`));
  page.on('request', (r) => {
    if (new URL(r.url()).origin !== g.base) foreign.push(r.url());
  });
  // Layout shifts not caused by input, summed as the Cumulative Layout Shift is.
  // Browser-side code is given as text: the tests are type-checked without the DOM's types.
  await page.addInitScript(`
    window.shift = 0;
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) if (!e.hadRecentInput) window.shift += e.value;
    }).observe({ type: 'layout-shift', buffered: true });
  `);

  const answer = await page.goto(`${g.base}/dashboard`);
  t.equal(answer?.status(), 200);
  const csp = (await answer!.allHeaders())['content-security-policy'] ?? '';
  t.match(csp, /connect-src 'self'/, 'the CSP keeps calls on this origin');
  t.match(csp, /frame-ancestors 'none'/);
  t.match(csp, /script-src 'self'/);
  t.notMatch(csp, /unsafe-inline|unsafe-eval/, 'no inline script or style');
  t.equal((await answer!.allHeaders())['x-frame-options'], 'DENY');
  await page.getByLabel('Management key').waitFor();
  t.same(consoleErrors, [], 'the page loads with no console error');
  await photograph(t, page, '1-sign-in');

  await page.getByLabel('Management key').fill('m'.repeat(48));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#sign-in-error', { hasText: 'Missing or invalid management key' }).waitFor();
  t.equal(await page.evaluate('sessionStorage.length'), 0, 'a refused key is not kept');
  // The browser reports the refused request itself; that is the one error the page may cause.
  t.ok(
    consoleErrors.every((e) => /status of 401/.test(e)),
    'the only console error is the 401 of the wrong key',
  );
  consoleErrors.length = 0;
  await photograph(t, page, '2-wrong-key');

  // By keyboard: the key typed, Enter to submit.
  await page.getByLabel('Management key').fill('');
  await page.getByLabel('Management key').focus();
  await page.keyboard.type(owner.managementKey);
  await page.keyboard.press('Enter');
  await page.getByRole('navigation', { name: 'Dashboard' }).waitFor();
  await page.locator('#usage-empty', { hasText: 'Create an endpoint' }).waitFor();
  t.match(await page.locator('#usage-empty code').textContent(), `curl -s -X POST`, 'the first call to copy');
  t.equal(await page.locator('#balance').textContent(), '1,000,000 RU');
  t.equal(await page.locator('#plan-endpoints').textContent(), '0 of 10');
  const stored = (await page.evaluate(
    '({ session: Object.values(sessionStorage), local: localStorage.length, cookie: document.cookie, url: location.href })',
  )) as { session: string[]; local: number; cookie: string; url: string };
  t.same(stored.session, [owner.managementKey], 'the key is kept in sessionStorage');
  t.equal(stored.local, 0, 'and nowhere else');
  t.equal(stored.cookie, '');
  t.notMatch(stored.url, owner.managementKey, 'nor in the address');
  await photograph(t, page, '3-usage-empty');

  await page.getByRole('link', { name: 'Networks' }).click();
  const publicUrl = `${g.base}/devnet/v1/rpc/public`;
  await page.locator('#networks code', { hasText: publicUrl }).waitFor();
  // Labelled by its scheme: this gateway serves plain HTTP, as the devnet does.
  await page.getByRole('button', { name: 'Copy the HTTP URL' }).click();
  t.equal(await clipboard(), publicUrl, "the public URL's copy button copies it");
  await page.locator('#announce', { hasText: 'the HTTP URL copied' }).waitFor();
  t.notMatch(await page.locator('#networks').textContent(), /HTTPS|WSS/, 'no https or wss label on plain URLs');
  await photograph(t, page, '4-networks');

  await page.getByRole('link', { name: 'Endpoints' }).click();
  await page.getByLabel('Network', { exact: true }).selectOption('devnet');
  await page.getByLabel('Name (optional)').fill('web');
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  await page.locator('#created').waitFor();
  t.match(await page.locator('#created').textContent(), /Shown once/);
  const apiKey = (await page.locator('#created-key').textContent()) ?? '';
  const httpsUrl = (await page.locator('#created-https').textContent()) ?? '';
  t.equal(httpsUrl, `${g.base}/devnet/v1/rpc/${apiKey}`);
  t.equal(await page.locator('#created-wss').textContent(), `${g.base.replace('http', 'ws')}/devnet/v1/rpc/${apiKey}`);
  t.match(await page.locator('#created-curl').textContent(), httpsUrl);
  for (const [name, text] of [
    ['Copy the API key', apiKey],
    ['Copy the URL', httpsUrl],
  ] as const) {
    await page.locator('#created').getByRole('button', { name }).click();
    t.equal(await clipboard(), text, `${name}: copied`);
  }
  await photograph(t, page, '5-endpoint-created');

  const call = await rpc(httpsUrl, 'eth_blockNumber');
  t.match(call.json, { result: /^0x/ }, 'the URL the page showed answers');
  const refused = await rpc(httpsUrl, 'eth_notAMethod');
  t.match(refused.json, { error: { code: -32601 } });

  await page.getByRole('button', { name: 'Done: I have copied them' }).click();
  t.equal(await page.locator('#created-key').textContent(), '', 'the key leaves the page');
  t.notMatch(await page.content(), apiKey);
  await page.getByRole('button', { name: 'Usage of web' }).click();
  t.equal(
    await page.getByLabel('Endpoint', { exact: true }).inputValue(),
    (await page.locator('#endpoints tr[data-id]').getAttribute('data-id')) ?? '',
  );
  // Usage reaches the store within the ledger's flush interval (200 ms): refreshed until it shows.
  const totals = page.locator('#usage-totals');
  for (let i = 0; i < 50 && !/^2 requests/.test((await totals.textContent()) ?? ''); i++) {
    await page.waitForTimeout(100);
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.waitForTimeout(100);
  }
  t.match(await totals.textContent(), /^2 requests, 10 RU and 1 error in the last day/);
  // With data the notice is one sentence: its box holds that, not the first steps' room.
  const noticeHeight = await page.locator('#usage-empty').evaluate((e) => e.getBoundingClientRect().height);
  t.ok(noticeHeight < 90, `the notice leaves no empty space once there is data (${noticeHeight} px)`);
  t.match(await page.locator('#methods tbody').textContent(), /eth_blockNumber/);
  t.match(
    await page.locator('#statuses tbody').textContent(),
    /JSON-RPC -32601\s*Method not found[^\d]*1/,
    'the error by its status, with its meaning',
  );
  await page.getByLabel('Period').selectOption('hour');
  await page.locator('#usage-totals', { hasText: 'in the last hour' }).waitFor();
  t.match(await totals.textContent(), /^2 requests/);
  await page.locator('#chart-requests canvas').waitFor();
  await photograph(t, page, '6-usage');
  // A reload signs in again from sessionStorage with no input at all, so every shift counts.
  await page.reload();
  await page.locator('#usage-totals', { hasText: '2 requests' }).waitFor();
  await page.waitForTimeout(300);
  const shift = (await page.evaluate('window.shift')) as number;
  t.ok(shift < 0.01, `no layout shift as data arrives (${shift})`);

  await page.getByRole('link', { name: 'Endpoints' }).click();
  // An endpoint without a name is named by its key prefix in the confirmation; Escape cancels.
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  await page.locator('#created').waitFor();
  const unnamedPrefix = ((await page.locator('#created-key').textContent()) ?? '').slice(0, 8);
  await page.getByRole('button', { name: 'Done: I have copied them' }).click();
  await page.getByRole('button', { name: `Delete ${unnamedPrefix}…` }).click();
  await page.getByRole('dialog').waitFor();
  t.match(await page.locator('#delete-title').textContent(), unnamedPrefix);
  await page.keyboard.press('Escape');
  await page.getByRole('dialog').waitFor({ state: 'hidden' });

  await page.getByRole('button', { name: 'Delete web' }).click();
  await page.getByRole('dialog').waitFor();
  t.match(await page.locator('#delete-title').textContent(), /“web”/, 'the confirmation names the endpoint');
  await photograph(t, page, '7-delete');
  await page.locator('#delete-confirm').click();
  await page.getByRole('dialog').waitFor({ state: 'hidden' });
  await page.locator('#endpoints tbody tr', { hasText: 'web' }).waitFor({ state: 'detached' });
  t.equal((await rpc(httpsUrl, 'eth_blockNumber')).status, 401, 'the deleted key is refused');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('Management key').waitFor();
  t.equal(await page.evaluate('sessionStorage.length'), 0, 'signing out forgets the key');
  t.same(consoleErrors, [], 'no console error');
  t.same(foreign, [], 'no request to another origin');
});

t.test('the management listener serves the dashboard; the main one then does not', async (t) => {
  const split = await gatewayFor(t, { chains: { devnet: evmChain([node.url]) }, management: { host: '127.0.0.1', port: 0 } });
  const { managementKey } = createOwnerAdmin(split.gateway.context.tenancy.store!).createOwner('split', 'free', 1);
  const page = await browser.newPage();
  t.teardown(() => page.close());
  const onManagement = await page.goto(`http://127.0.0.1:${split.gateway.managementPort}/dashboard`);
  t.equal(onManagement?.status(), 200);
  await page.getByLabel('Management key').fill(managementKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#balance', { hasText: '1 RU' }).waitFor();
  const onMain = await page.goto(`${split.base}/dashboard`);
  t.equal(onMain?.status(), 404);
});
