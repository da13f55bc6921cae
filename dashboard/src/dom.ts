/** The few DOM helpers the views share: find by id, build elements, copy text, announce to screen readers. */

/** The element of `id`, which index.html is known to have: a missing one is a bug of the page, so it throws. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (found === null) throw new Error(`the page has no #${id}`);
  return found as T;
}

type Child = Node | string;

/** An element with attributes (`class`, `aria-*`, ...) and children; text is set as text, never as HTML. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) e.setAttribute(name, value);
  e.append(...children);
  return e;
}

/** Says `message` in the page's live region, for screen readers. */
export function announce(message: string): void {
  const region = byId('announce');
  region.textContent = '';
  // A new text node in a later task, so the same message twice is announced twice.
  setTimeout(() => (region.textContent = message), 50);
}

/**
 * Copies `text`. The Clipboard API needs a secure context (HTTPS or localhost); a gateway reached over
 * plain HTTP on a LAN address has none, so the page falls back to copying a selection.
 */
export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard !== undefined) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // Refused (no permission): try the selection below.
  }
  const area = h('textarea', { class: 'offscreen', readonly: '', 'aria-hidden': 'true' });
  area.value = text;
  document.body.append(area);
  area.select();
  const copied = document.execCommand('copy');
  area.remove();
  return copied;
}

/** A Copy button for the text `read` gives when pressed, with an accessible name saying what it copies. */
export function copyButton(what: string, read: () => string): HTMLButtonElement {
  const button = h('button', { type: 'button', class: 'copy', 'aria-label': `Copy ${what}` }, 'Copy');
  button.addEventListener('click', () => void copied(button, what, read()));
  return button;
}

async function copied(button: HTMLButtonElement, what: string, text: string): Promise<void> {
  const ok = await copyText(text);
  button.textContent = ok ? 'Copied' : 'Copy failed';
  announce(ok ? `${what} copied` : `Could not copy ${what}: select it and copy by hand`);
  setTimeout(() => (button.textContent = 'Copy'), 2000);
}

/** Wires the Copy buttons written in index.html: `data-copy` names the element whose text they copy. */
export function wireCopyButtons(root: ParentNode): void {
  for (const button of root.querySelectorAll<HTMLButtonElement>('button[data-copy]')) {
    const source = byId(button.dataset.copy ?? '');
    const what = (button.getAttribute('aria-label') ?? 'Copy').replace(/^Copy /, '');
    button.addEventListener('click', () => void copied(button, what, source.textContent ?? ''));
  }
}

const numbers = new Intl.NumberFormat('en');

export function formatNumber(n: number): string {
  return numbers.format(n);
}

/** A table body's rows replaced at once; `empty` is the one row shown when there are none. */
export function fillRows(body: HTMLTableSectionElement, rows: HTMLTableRowElement[], empty: string, columns: number): void {
  if (rows.length === 0) rows = [h('tr', {}, h('td', { colspan: String(columns), class: 'muted' }, empty))];
  body.replaceChildren(...rows);
}
