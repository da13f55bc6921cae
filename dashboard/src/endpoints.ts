import { type Chain, type Endpoint, api } from './api.js';
import { announce, byId, fillRows, h } from './dom.js';
import { setUpEndpointSettings } from './endpoint-settings.js';
import { fillNetworkPicker, firstCall } from './networks.js';

/** What the endpoints view needs from the page: the data it shows, and what to do after a change. */
export interface EndpointsContext {
  chains: () => Chain[];
  endpoints: () => Endpoint[];
  /** Reloads the endpoints (and what depends on them) after a create or a delete. */
  changed: () => Promise<void>;
  /** A refused call: a 401 signs out, anything else is shown in `where`. */
  failed: (err: unknown, where: HTMLElement) => void;
  /** Opens the usage view on one endpoint. */
  showUsage: (endpointId: string) => void;
}

/** How the page names an endpoint: its name, or its key prefix for one without a name. */
export function endpointLabel(e: Endpoint): string {
  return e.name ?? `${e.key_prefix}…`;
}

function networkName(chains: Chain[], slug: string): string {
  return chains.find((c) => c.slug === slug)?.name ?? slug;
}

export function setUpEndpoints(ctx: EndpointsContext): { show: () => void } {
  const form = byId<HTMLFormElement>('create-form');
  const picker = byId<HTMLSelectElement>('create-network');
  const nameInput = byId<HTMLInputElement>('create-name');
  const createError = byId('create-error');
  const created = byId('created');
  const dialog = byId<HTMLDialogElement>('delete-dialog');
  const deleteError = byId('delete-error');
  let deleting: Endpoint | null = null;
  let returnFocus: HTMLElement | null = null;
  const settings = setUpEndpointSettings({ changed: ctx.changed, failed: ctx.failed, label: endpointLabel });

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void create();
  });

  async function create(): Promise<void> {
    createError.textContent = '';
    const name = nameInput.value.trim();
    try {
      const made = await api.createEndpoint(picker.value, name === '' ? undefined : name);
      const chain = ctx.chains().find((c) => c.slug === made.network);
      byId('created-key').textContent = made.api_key;
      byId('created-https').textContent = made.https_url;
      byId('created-wss').textContent = made.wss_url ?? '';
      byId('created-wss-label').hidden = made.wss_url === null;
      byId('created-wss-value').hidden = made.wss_url === null;
      byId('created-curl').textContent = firstCall(chain?.kind ?? 'evm', made.https_url);
      created.hidden = false;
      created.focus();
      nameInput.value = '';
      await ctx.changed();
    } catch (err) {
      ctx.failed(err, createError);
    }
  }

  byId('created-done').addEventListener('click', () => {
    // The key leaves the page: it was shown once.
    for (const id of ['created-key', 'created-https', 'created-wss', 'created-curl']) byId(id).textContent = '';
    created.hidden = true;
    picker.focus();
  });

  function askDelete(e: Endpoint, button: HTMLButtonElement): void {
    deleting = e;
    returnFocus = button;
    deleteError.textContent = '';
    byId('delete-title').textContent = `Delete the endpoint “${endpointLabel(e)}”?`;
    byId('delete-text').textContent =
      `Its key (${e.key_prefix}…) stops working at once on ${networkName(ctx.chains(), e.network)}, and its open connections are closed. Its usage stays in the totals.`;
    dialog.showModal();
    byId('delete-cancel').focus();
  }

  byId('delete-cancel').addEventListener('click', () => dialog.close());
  dialog.addEventListener('close', () => {
    deleting = null;
    if (returnFocus?.isConnected) returnFocus.focus();
    else picker.focus();
  });
  byId('delete-confirm').addEventListener('click', () => void confirmDelete());

  async function confirmDelete(): Promise<void> {
    const e = deleting;
    if (e === null) return;
    try {
      await api.deleteEndpoint(e.id);
      dialog.close();
      announce(`Endpoint ${endpointLabel(e)} deleted`);
      await ctx.changed();
    } catch (err) {
      ctx.failed(err, deleteError);
    }
  }

  function show(): void {
    const chains = ctx.chains();
    fillNetworkPicker(picker, chains);
    const endpoints = ctx.endpoints();
    const rows = endpoints.map((e) => {
      const remove = h('button', { type: 'button', class: 'danger needs-developer', 'aria-label': `Delete ${endpointLabel(e)}` }, 'Delete');
      remove.addEventListener('click', () => askDelete(e, remove));
      const usage = h('button', { type: 'button', 'aria-label': `Usage of ${endpointLabel(e)}` }, 'Usage');
      usage.addEventListener('click', () => ctx.showUsage(e.id));
      const edit = h(
        'button',
        { type: 'button', class: 'needs-developer', 'aria-label': `Restrictions of ${endpointLabel(e)}` },
        'Restrictions',
      );
      edit.addEventListener('click', () => settings.edit(e, edit));
      const rotate = h(
        'button',
        { type: 'button', class: 'needs-developer', 'aria-label': `Rotate the key of ${endpointLabel(e)}` },
        'Rotate key',
      );
      rotate.addEventListener('click', () => settings.rotate(e, rotate));
      // A key in a rotation's grace is listed under the current one with its end.
      const previous =
        e.previous_key_prefix === null || e.previous_key_expires_at === null
          ? []
          : [
              h(
                'span',
                { class: 'previous-key muted' },
                'previous ',
                h('code', {}, `${e.previous_key_prefix}…`),
                ' until ',
                h('time', { datetime: e.previous_key_expires_at }, new Date(e.previous_key_expires_at).toLocaleString()),
              ),
            ];
      return h(
        'tr',
        { 'data-id': e.id },
        h('th', { scope: 'row' }, e.name ?? h('span', { class: 'muted' }, '(no name)')),
        h('td', {}, networkName(chains, e.network)),
        h('td', { 'data-label': 'Key prefix' }, h('code', {}, e.key_prefix), ...previous),
        h('td', {}, h('time', { datetime: e.created_at }, new Date(e.created_at).toLocaleString())),
        h('td', { class: 'actions' }, usage, edit, rotate, remove),
      );
    });
    fillRows(
      byId<HTMLTableSectionElement>('endpoints').querySelector('tbody')!,
      rows,
      'No endpoints yet: create one above to get an API key.',
      5,
    );
  }

  return { show };
}
