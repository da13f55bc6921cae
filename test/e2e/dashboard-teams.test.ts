import t, { type Test } from 'tap';
import type { Page } from 'playwright-core';
import { verifyDelivery } from '../../src/alerts/signature.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { browserFor } from '../support/browser.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';
import { freePort } from '../support/servers.js';
import { webhookReceiver } from '../support/webhook-receiver.js';
import { waitFor } from '../support/wait-for.js';

const LONG_NAME = 'Ethereum-Sepolia-Archive-Testnet-Network';
t.equal(LONG_NAME.length, 40);

const node = await anvilFor(t);
const port = await freePort();
const g = await gatewayFor(t, {
  server: { port, default_chain: 'devnet' },
  chains: { devnet: evmChain([node.url], 31337, { name: LONG_NAME }) },
  webhooks: { allow_private: true, check_interval_s: 1, retry_for_s: 10 },
});
const admin = createOwnerAdmin(g.gateway.context.tenancy.store!);
const owner = admin.createOwner('Owner-with-a-rather-long-name-for-a-phone', 'free', 1_000_000);
const viewerKey = admin.createManagementKey(owner.id, 'viewer')!;
const browser = await browserFor(t);

/** A local receiver of webhooks: every POST it was sent. */
const { url: hookUrl, got } = await webhookReceiver(t);

async function noSidewaysScroll(t: Test, page: Page, view: string): Promise<void> {
  await page.setViewportSize({ width: 360, height: 780 });
  t.equal(await page.evaluate('document.documentElement.scrollWidth'), 360, `${view}: no sideways scroll at 360 px`);
  await page.setViewportSize({ width: 1280, height: 900 });
}

async function signIn(page: Page, key: string): Promise<void> {
  await page.goto(`${g.base}/dashboard`);
  await page.getByLabel('Management key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Dashboard' }).waitFor();
}

t.test('an admin: every view fits 360 px, labels, meanings, auto refresh, a webhook delivered', async (t) => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  t.teardown(() => context.close());
  const page = await context.newPage();
  let statsCalls = 0;
  page.on('request', (r) => {
    if (r.url().includes('/api/dashboard/endpoints/stats')) statsCalls++;
  });
  await signIn(page, owner.managementKey);
  // A short refresh interval for the test (the page's own is 30 s), read when the usage view is next shown.
  await page.evaluate('document.documentElement.dataset.refreshMs = "300"');
  t.equal(await page.locator('#account-name').textContent(), 'Owner-with-a-rather-long-name-for-a-phone');
  t.match(
    await page.locator('#view-usage dl.owner').textContent(),
    /Owner.*This key.*admin/s,
    "the owner's name and the key's role labelled",
  );

  await page.getByRole('link', { name: 'Endpoints' }).click();
  await page.getByLabel('Network', { exact: true }).selectOption('devnet');
  await noSidewaysScroll(t, page, 'endpoints, its form');
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  await page.locator('#created').waitFor();
  const httpsUrl = (await page.locator('#created-https').textContent()) ?? '';
  await page.getByRole('button', { name: 'Done: I have copied them' }).click();
  await noSidewaysScroll(t, page, 'endpoints, with one');
  t.ok(await page.getByRole('button', { name: /^Restrictions of/ }).isVisible(), 'an admin edits restrictions');
  t.ok(await page.getByRole('button', { name: /^Rotate the key of/ }).isVisible(), 'and rotates keys');

  // An error to show: a method anvil does not have, answered by the gateway with its code.
  const answer = await rpc(httpsUrl, 'eth_noSuchMethod', []);
  t.match(answer.json, { error: { code: Number } }, 'an error answered');
  await page.getByRole('link', { name: 'Usage' }).click();
  // The usage view refreshes itself (and the call may reach the store after its first read).
  await page.locator('#statuses tbody tr th', { hasText: 'JSON-RPC' }).waitFor({ timeout: 10_000 });
  const meaning = (await page.locator('#statuses tbody tr td').first().textContent()) ?? '';
  t.ok(meaning.length > 3 && !/^\d/.test(meaning), `the status has its meaning: ${meaning}`);
  await noSidewaysScroll(t, page, 'usage');

  // Usage refreshes by itself while visible, and not while the tab is hidden.
  const before = statsCalls;
  await waitFor(() => statsCalls >= before + 2, { what: 'two refreshes by themselves' });
  await page.evaluate(`
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
    document.dispatchEvent(new Event('visibilitychange'));
  `);
  const hiddenAt = statsCalls;
  await page.waitForFunction('new Promise((r) => setTimeout(() => r(true), 1200))');
  t.equal(statsCalls, hiddenAt, 'no refresh while hidden');
  await page.evaluate(`
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'visible' });
    document.dispatchEvent(new Event('visibilitychange'));
  `);
  await waitFor(() => statsCalls > hiddenAt, { what: 'a refresh once visible again' });

  await page.getByRole('link', { name: 'Networks' }).click();
  await page.locator('#networks tbody tr').first().waitFor();
  await noSidewaysScroll(t, page, 'networks');

  await page.getByRole('link', { name: 'Alerts' }).click();
  await page.locator('#webhooks-list', { hasText: 'No webhooks yet' }).waitFor();
  await noSidewaysScroll(t, page, 'alerts, empty');
  // A refusal in the API's words, naming the field.
  await page.getByLabel('URL', { exact: true }).fill(hookUrl);
  await page.getByLabel('Balance below (RU)').check();
  await page.getByLabel('Balance threshold in RU').fill('2000000');
  await page.getByLabel(/^Secret/).fill('short');
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await page.locator('#webhook-error', { hasText: 'secret: must be 16' }).waitFor();
  await page.getByLabel(/^Secret/).fill('shared-secret-of-the-owner');
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await waitFor(() => got.length >= 1, { ms: 10_000, what: 'a delivery at the receiver' });
  const delivery = got[0]!;
  const ts = delivery.headers['x-chaingate-timestamp'] as string;
  t.ok(verifyDelivery('shared-secret-of-the-owner', ts, delivery.body, delivery.headers['x-chaingate-signature'] as string), 'signed');
  t.match(JSON.parse(delivery.body), { event: 'balance_low', data: { balance_below_ru: 2_000_000 } });
  await waitFor(
    async () => {
      await page.getByRole('link', { name: 'Usage' }).click();
      await page.getByRole('link', { name: 'Alerts' }).click();
      return (await page.locator('#webhooks-list .delivery-delivered').count()) === 1;
    },
    { ms: 10_000, what: 'the delivery shown as delivered' },
  );
  await noSidewaysScroll(t, page, 'alerts, with a delivery');
});

t.test('a viewer: what it may not do is hidden, and a DELETE is refused naming the role', async (t) => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  t.teardown(() => context.close());
  const page = await context.newPage();
  await signIn(page, viewerKey);
  t.match(await page.locator('#account-role').textContent(), /viewer/);
  await page.getByRole('link', { name: 'Endpoints' }).click();
  await page.locator('#endpoints tbody tr[data-id]').first().waitFor();
  t.notOk(await page.locator('#create-form').isVisible(), 'no create form');
  t.equal(await page.locator('#endpoints button.danger').count(), 1, 'the delete button is in the page');
  t.notOk(await page.locator('#endpoints button.danger').isVisible(), 'but not shown');
  t.equal(await page.getByRole('button', { name: /^Rotate the key of/ }).count(), 0, 'no rotation');
  t.equal(await page.getByRole('button', { name: /^Restrictions of/ }).count(), 0, 'no restrictions to edit');
  await noSidewaysScroll(t, page, 'endpoints as a viewer');
  await page.getByRole('link', { name: 'Alerts' }).click();
  await page.locator('#webhooks-list .webhook').first().waitFor();
  t.notOk(await page.locator('#webhook-form').isVisible(), 'no webhook form');
  t.notOk(await page.getByRole('button', { name: /^Delete the webhook/ }).isVisible());
  const id = await page.locator('#endpoints tbody tr[data-id]').first().getAttribute('data-id');
  const refused = (await page.evaluate(`
    fetch('/api/dashboard/endpoints?id=${id}', { method: 'DELETE', headers: { authorization: 'Bearer ' + sessionStorage.getItem(Object.keys(sessionStorage)[0]) } })
      .then(async (r) => ({ status: r.status, body: await r.json() }))
  `)) as { status: number; body: { error: { code: string; message: string } } };
  t.equal(refused.status, 403);
  t.equal(refused.body.error.code, 'role_refused');
  t.match(refused.body.error.message, /viewer key may not DELETE/);
});
