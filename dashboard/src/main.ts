import './style.css';
import { type Account, ApiError, type Chain, type Endpoint, api } from './api.js';
import { byId, wireCopyButtons } from './dom.js';
import { setUpEndpoints } from './endpoints.js';
import { showNetworks } from './networks.js';
import { forgetKey, readKey, saveKey } from './session.js';
import './teams.css';
import { type AutoRefresh, startAutoRefresh } from './auto-refresh.js';
import { applyRole } from './roles.js';
import { setUpUsage } from './usage.js';
import { setUpWebhooks } from './webhooks.js';

/**
 * The owners' dashboard: sign in with a management key, then three views (usage, endpoints, networks)
 * chosen by the address's fragment. Everything it shows comes from the management API on this origin.
 */

const VIEWS = ['usage', 'endpoints', 'networks', 'alerts'] as const;
type View = (typeof VIEWS)[number];

let account: Account | null = null;
let chains: Chain[] = [];
let endpoints: Endpoint[] = [];

const signInError = byId('sign-in-error');

/**
 * A refused call: a 401 means the key no longer works (revoked), a 403 `owner_suspended` that its owner
 * was suspended meanwhile: either way the page signs out, saying why.
 */
function failed(err: unknown, where: HTMLElement): void {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof ApiError && (err.status === 401 || err.code === 'owner_suspended')) {
    signOut();
    signInError.textContent = `Signed out: ${message}`;
    return;
  }
  where.textContent = message;
}

const endpointsView = setUpEndpoints({
  chains: () => chains,
  endpoints: () => endpoints,
  changed: async () => {
    [endpoints, account] = await Promise.all([api.endpoints(), api.account()]);
    endpointsView.show();
  },
  failed,
  showUsage: (id) => {
    location.hash = '#usage';
    void usageView.show(id);
  },
});
const usageView = setUpUsage({ account: () => account, chains: () => chains, endpoints: () => endpoints, failed });
const webhooksView = setUpWebhooks({ failed });
/** The usage view's own refresh, every 30 s while it is shown and the tab visible. */
let usageRefresh: AutoRefresh | null = null;

function viewOf(hash: string): View {
  const name = hash.replace(/^#/, '');
  return (VIEWS as readonly string[]).includes(name) ? (name as View) : 'usage';
}

function show(view: View | 'sign-in'): void {
  for (const section of document.querySelectorAll<HTMLElement>('section.view')) section.hidden = section.id !== `view-${view}`;
  for (const link of byId('nav').querySelectorAll('a')) {
    if (link.getAttribute('href') === `#${view}`) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  usageRefresh?.stop();
  usageRefresh = null;
  if (view === 'usage') {
    void usageView.show();
    usageRefresh = startAutoRefresh(() => void usageView.refresh());
  }
  if (view === 'endpoints') endpointsView.show();
  if (view === 'networks') showNetworks(chains);
  if (view === 'alerts') void webhooksView.show();
}

function signedIn(on: boolean): void {
  byId('nav').hidden = !on;
  byId('sign-out').hidden = !on;
}

async function enter(): Promise<void> {
  try {
    [account, chains, endpoints] = await Promise.all([api.account(), api.chains(), api.endpoints()]);
  } catch (err) {
    signOut();
    signInError.textContent = err instanceof Error ? err.message : String(err);
    return;
  }
  applyRole(account);
  signedIn(true);
  show(viewOf(location.hash));
}

function signOut(): void {
  forgetKey();
  account = null;
  applyRole(null);
  chains = [];
  endpoints = [];
  // Nothing of the owner's stays in the page: a created key still on screen included.
  for (const id of ['created-key', 'created-https', 'created-wss', 'created-curl', 'rotated-key', 'rotated-https']) {
    byId(id).textContent = '';
  }
  byId('created').hidden = true;
  for (const dialog of document.querySelectorAll('dialog')) dialog.close();
  signedIn(false);
  signInError.textContent = '';
  show('sign-in');
  byId('key-input').focus();
}

byId<HTMLFormElement>('sign-in-form').addEventListener('submit', (event) => {
  event.preventDefault();
  void signIn();
});

async function signIn(): Promise<void> {
  const input = byId<HTMLInputElement>('key-input');
  const key = input.value.trim();
  signInError.textContent = '';
  if (key === '') {
    signInError.textContent = 'Enter your management key';
    return;
  }
  try {
    await api.account(key);
  } catch (err) {
    signInError.textContent = err instanceof Error ? err.message : String(err);
    input.focus();
    return;
  }
  saveKey(key);
  input.value = '';
  await enter();
  byId('content').focus();
}

byId('sign-out').addEventListener('click', signOut);
window.addEventListener('hashchange', () => {
  if (readKey() === null) return;
  show(viewOf(location.hash));
  byId('content').focus();
});
wireCopyButtons(document);

if (readKey() === null) show('sign-in');
else void enter();
