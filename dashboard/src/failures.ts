import { api, type Failure } from './api.js';
import { byId, fillRows, h } from './dom.js';
import { failureMeaning } from './error-meanings.js';

/** One endpoint's recent failed calls (issue 36 §2): newest first, each code with its meaning. */
export function setUpFailures(failed: (err: unknown, where: HTMLElement) => void): { show(endpointId: string | undefined): Promise<void> } {
  const body = byId('failures').querySelector('tbody')!;
  const note = byId('failures-note');
  let generation = 0;

  function row(f: Failure): HTMLTableRowElement {
    const when = new Date(f.time * 1000);
    return h(
      'tr',
      {},
      h('td', {}, h('time', { datetime: when.toISOString() }, when.toLocaleString())),
      h('td', {}, h('code', {}, f.method)),
      h('td', { class: 'num' }, String(f.http_status)),
      h('td', { class: 'num' }, f.code === null ? '–' : String(f.code)),
      h('td', {}, failureMeaning(f.error, f.code, f.http_status)),
      h('td', {}, f.upstream ?? '–'),
    );
  }

  return {
    async show(endpointId) {
      const mine = ++generation;
      if (endpointId === undefined) {
        note.textContent = 'Choose an endpoint above to see its recent failed calls.';
        fillRows(body, [], 'No endpoint chosen.', 6);
        return;
      }
      let list: Failure[];
      try {
        list = await api.failures(endpointId);
      } catch (err) {
        failed(err, note);
        return;
      }
      if (mine !== generation) return;
      note.textContent = `The last ${list.length} failed or refused calls, newest first (never their params or key).`;
      fillRows(body, list.map(row), 'No failed calls kept for this endpoint.', 6);
    },
  };
}
