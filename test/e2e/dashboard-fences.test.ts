/**
 * The dashboard's restrictions and key rotation (issue 31) in a real headless Chromium, in front of a
 * gateway and a real anvil: a suspended owner told so at sign-in, the settings form with the API's
 * problems under their fields, a save read back, a rotation with a grace (both keys answer, the old one
 * listed with its end) and one at once (the old key refused). Photographed into .tap/screenshots/dashboard/.
 */
import t from 'tap';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { browserFor } from '../support/browser.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';
import { freePort } from '../support/servers.js';

const SHOTS = fileURLToPath(new URL('../../.tap/screenshots/dashboard/', import.meta.url));
mkdirSync(SHOTS, { recursive: true });

const node = await anvilFor(t);
const port = await freePort();
const g = await gatewayFor(t, { server: { port, default_chain: 'devnet' }, chains: { devnet: evmChain([node.url]) } });
const admin = createOwnerAdmin(g.gateway.context.tenancy.store!);
const owner = admin.createOwner('fenced', 'free', 1_000_000);
const suspended = admin.createOwner('gone', 'free', 1);
admin.setSuspended(suspended.id, true);
const browser = await browserFor(t);

type Listed = { data: Array<Record<string, unknown> & { id: string; name: string | null }> };

async function listed(): Promise<Listed['data']> {
  const res = await fetch(`${g.base}/api/dashboard/endpoints`, { headers: { authorization: `Bearer ${owner.managementKey}` } });
  return ((await res.json()) as Listed).data;
}

t.test('restrictions saved from the form, a key rotated with and without a grace', async (t) => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  t.teardown(() => context.close());
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (err) => consoleErrors.push(`uncaught: ${err.message}`));
  await page.goto(`${g.base}/dashboard`);

  await page.getByLabel('Management key').fill(suspended.managementKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#sign-in-error', { hasText: 'Owner suspended' }).waitFor();
  t.equal(await page.evaluate('sessionStorage.length'), 0, "a suspended owner's key is not kept");

  await page.getByLabel('Management key').fill(owner.managementKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Dashboard' }).waitFor();
  await page.getByRole('link', { name: 'Endpoints' }).click();
  await page.getByLabel('Name (optional)').fill('web');
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  await page.locator('#created').waitFor();
  const first = (await page.locator('#created-key').textContent()) ?? '';
  await page.getByRole('button', { name: 'Done: I have copied them' }).click();

  // Problems: each under its own field, the dialog stays open, nothing is saved.
  await page.getByRole('button', { name: 'Restrictions of web' }).click();
  await page.getByRole('dialog').waitFor();
  t.match(await page.locator('#hint-key_in_path').textContent(), /X-API-Key/, 'each setting says what it does');
  await page.getByLabel('Allowed origins').fill('https://App.example.com\nnot an origin');
  await page.getByLabel('Allowed IP addresses').fill('10.0.0.0/33');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.locator('#err-allowed_origins', { hasText: 'Entry 2' }).waitFor();
  t.match(await page.locator('#err-allowed_ips').textContent(), /Entry 1: .*10\.0\.0\.0\/33/);
  t.match(await page.locator('#settings-error').textContent(), /^Not saved/);
  t.equal(await page.locator('#err-allowed_methods').textContent(), '', 'a field without a problem shows none');
  await page.screenshot({ path: `${SHOTS}8-restrictions-refused.png`, fullPage: true });
  t.match(await listed(), [{ name: 'web', allowed_origins: null, allowed_ips: null }], 'nothing saved');

  await page.getByLabel('Allowed origins').fill('https://App.example.com');
  await page.getByLabel('Allowed IP addresses').fill('');
  await page.getByLabel('Allowed methods').fill('eth_blockNumber\neth_chainId');
  await page.getByLabel('Allow requests without an origin').check();
  await page.getByLabel('Longest token lifetime (seconds)').fill('600');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.locator('#settings-dialog').waitFor({ state: 'hidden' });
  t.match(await listed(), [
    {
      allowed_origins: ['https://app.example.com'],
      allow_no_origin: true,
      allowed_ips: null,
      allowed_methods: ['eth_blockNumber', 'eth_chainId'],
      key_in_path: true,
      jwt_keys: null,
      jwt_max_lifetime_s: 600,
    },
  ]);
  await page.getByRole('button', { name: 'Restrictions of web' }).click();
  t.equal(await page.getByLabel('Allowed origins').inputValue(), 'https://app.example.com', 'the form shows what was saved');
  await page.getByRole('button', { name: 'Cancel' }).click();

  // A rotation with a grace: the new key shown once, the old one listed with its end, both answering.
  await page.getByRole('button', { name: 'Rotate the key of web' }).click();
  await page.getByLabel('The current key keeps working for').selectOption('3600');
  await page.locator('#rotate-confirm').click();
  await page.locator('#rotated').waitFor();
  const second = (await page.locator('#rotated-key').textContent()) ?? '';
  t.match(second, /^\w{32,}$/);
  t.not(second, first);
  t.equal(await page.locator('#rotated-https').textContent(), `${g.base}/devnet/v1/rpc/${second}`);
  t.match(await page.locator('#rotated-previous').textContent(), `${first.slice(0, 8)}… works until`);
  await page.screenshot({ path: `${SHOTS}9-key-rotated.png`, fullPage: true });
  await page.getByRole('button', { name: 'Done: I have copied it' }).click();
  // The page clears the key as it closes the dialog, after the click's own task: waited for, not assumed.
  await page.waitForFunction("document.querySelector('#rotated-key')?.textContent === ''", undefined, { timeout: 5000 });
  t.equal(await page.locator('#rotated-key').textContent(), '', 'the new key leaves the page');
  t.notMatch(await page.content(), second);
  const row = page.locator('#endpoints tr[data-id]', { hasText: 'web' });
  await row.locator('.previous-key', { hasText: `${first.slice(0, 8)}…` }).waitFor();
  const [ep] = await listed();
  const ends = Date.parse(String(ep!.previous_key_expires_at));
  t.ok(Math.abs(ends - (Date.now() + 3_600_000)) < 60_000, 'the previous key ends in an hour');
  t.match((await rpc(`${g.base}/devnet/v1/rpc/${first}`, 'eth_blockNumber')).json, { result: /^0x/ }, 'the old key works in its grace');
  t.match((await rpc(`${g.base}/devnet/v1/rpc/${second}`, 'eth_blockNumber')).json, { result: /^0x/ }, 'the new key works');

  // At once: the key before is refused, and no previous key is listed.
  await page.getByRole('button', { name: 'Rotate the key of web' }).click();
  await page.getByLabel('The current key keeps working for').selectOption('0');
  await page.locator('#rotate-confirm').click();
  await page.locator('#rotated-previous', { hasText: 'is refused from now on' }).waitFor();
  await page.getByRole('button', { name: 'Done: I have copied it' }).click();
  await row.locator('.previous-key').waitFor({ state: 'detached' });
  t.equal((await rpc(`${g.base}/devnet/v1/rpc/${second}`, 'eth_blockNumber')).status, 401, 'the key rotated out at once is refused');

  t.ok(
    consoleErrors.every((e) => /status of (403|400)/.test(e)),
    `the only console errors are the suspended sign-in's 403 and the refused save's 400 (${consoleErrors.join('; ')})`,
  );
});
