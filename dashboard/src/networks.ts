import type { Chain } from './api.js';
import { byId, copyButton, fillRows, h } from './dom.js';

/** A URL with its scheme as its label (HTTP or HTTPS, WS or WSS: a devnet's are plain), and a copy button. */
function urlCell(url: string | null): HTMLElement {
  if (url === null) return h('span');
  const label = url.slice(0, url.indexOf(':')).toUpperCase();
  return h(
    'div',
    { class: 'value' },
    h('span', { class: 'label' }, `${label} `),
    h('code', {}, url),
    copyButton(`the ${label} URL`, () => url),
  );
}

/** The networks view: each configured chain with its keyless public URLs. */
export function showNetworks(chains: Chain[]): void {
  const rows = chains.map((c) =>
    h(
      'tr',
      {},
      h('th', { scope: 'row' }, c.name === c.slug ? c.slug : `${c.name} (${c.slug})`),
      h('td', {}, c.kind === 'evm' ? 'JSON-RPC' : 'Beacon'),
      h('td', { 'data-label': 'Chain id' }, c.chain_id === null ? '–' : String(c.chain_id)),
      h('td', { class: 'urls' }, urlCell(c.public_https_url), urlCell(c.public_wss_url)),
    ),
  );
  fillRows(byId<HTMLTableSectionElement>('networks').querySelector('tbody')!, rows, 'This gateway serves no network.', 4);
}

/** The network picker of the create form. */
export function fillNetworkPicker(select: HTMLSelectElement, chains: Chain[]): void {
  const chosen = select.value;
  select.replaceChildren(...chains.map((c) => h('option', { value: c.slug }, c.name === c.slug ? c.slug : `${c.name} (${c.slug})`)));
  if (chains.some((c) => c.slug === chosen)) select.value = chosen;
}

/** A first call to paste in a terminal: a block number on JSON-RPC, the genesis on a Beacon chain. */
export function firstCall(kind: Chain['kind'], httpsUrl: string): string {
  if (kind === 'beacon') return `curl -s '${httpsUrl}/eth/v1/beacon/genesis'`;
  return `curl -s -X POST -H 'Content-Type: application/json' --data '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' '${httpsUrl}'`;
}
