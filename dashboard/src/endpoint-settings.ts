import { ApiError, api, type Endpoint, type EndpointSettings } from './api.js';
import { announce, byId } from './dom.js';

/** What the settings and rotation dialogs need from the page. */
export interface SettingsContext {
  /** Reloads the endpoints after a change. */
  changed: () => Promise<void>;
  /** A refused call: a 401 signs out, anything else is shown in `where`. */
  failed: (err: unknown, where: HTMLElement) => void;
  /** How the page names an endpoint. */
  label: (e: Endpoint) => string;
}

const LISTS = ['allowed_origins', 'allowed_ips', 'allowed_methods', 'allowed_contracts'] as const;
const FLAGS = ['allow_no_origin', 'key_in_path'] as const;
const FIELDS: ReadonlyArray<keyof EndpointSettings> = [...LISTS, ...FLAGS, 'jwt_keys', 'jwt_max_lifetime_s'];

/** One entry per line; none: null, which restricts nothing. */
function readList(id: string): string[] | null {
  const lines = byId<HTMLTextAreaElement>(id)
    .value.split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  return lines.length === 0 ? null : lines;
}

/** `allowed_ips[1]` as its field and "entry 2: ...", so the message sits under its control. */
function placeProblem(field: string, message: string): boolean {
  const m = /^([a-z_]+)(?:\[(\d+)\])?(?:\.(.+))?$/.exec(field);
  const where = document.getElementById(`err-${m?.[1] ?? ''}`);
  if (m === null || where === null) return false;
  const entry = m[2] === undefined ? '' : `Entry ${Number(m[2]) + 1}${m[3] === undefined ? '' : ` (${m[3]})`}: `;
  where.textContent = `${where.textContent ?? ''}${where.textContent ? ' ' : ''}${entry}${message}`;
  return true;
}

/**
 * The settings dialog (one form for every restriction, each with a line saying what it does, saved by
 * PATCH, the API's problems shown under their fields) and the rotation dialog (a grace to choose, then
 * the new key shown once with the previous key's end).
 */
export function setUpEndpointSettings(ctx: SettingsContext): {
  edit: (e: Endpoint, from: HTMLElement) => void;
  rotate: (e: Endpoint, from: HTMLElement) => void;
} {
  const settingsDialog = byId<HTMLDialogElement>('settings-dialog');
  const settingsError = byId('settings-error');
  const rotateDialog = byId<HTMLDialogElement>('rotate-dialog');
  const rotateError = byId('rotate-error');
  let editing: Endpoint | null = null;
  let rotating: Endpoint | null = null;
  let returnFocus: HTMLElement | null = null;

  function clearErrors(): void {
    settingsError.textContent = '';
    for (const field of FIELDS) byId(`err-${field}`).textContent = '';
  }

  function edit(e: Endpoint, from: HTMLElement): void {
    editing = e;
    returnFocus = from;
    clearErrors();
    byId('settings-title').textContent = `Restrictions of “${ctx.label(e)}”`;
    for (const field of LISTS) byId<HTMLTextAreaElement>(`set-${field}`).value = (e[field] ?? []).join('\n');
    for (const field of FLAGS) byId<HTMLInputElement>(`set-${field}`).checked = e[field];
    byId<HTMLTextAreaElement>('set-jwt_keys').value = e.jwt_keys === null ? '' : JSON.stringify(e.jwt_keys, null, 2);
    byId<HTMLInputElement>('set-jwt_max_lifetime_s').value = String(e.jwt_max_lifetime_s);
    settingsDialog.showModal();
    byId('set-allowed_origins').focus();
  }

  /** The form as a PATCH body (every field, so what is shown is what is kept), or null when it cannot be read. */
  function readForm(): Partial<Record<keyof EndpointSettings, unknown>> | null {
    const body: Partial<Record<keyof EndpointSettings, unknown>> = {};
    for (const field of LISTS) body[field] = readList(`set-${field}`);
    for (const field of FLAGS) body[field] = byId<HTMLInputElement>(`set-${field}`).checked;
    const keys = byId<HTMLTextAreaElement>('set-jwt_keys').value.trim();
    try {
      body.jwt_keys = keys === '' ? null : (JSON.parse(keys) as unknown);
    } catch {
      byId('err-jwt_keys').textContent =
        'Not valid JSON: a list such as [{"id": "k1", "alg": "ES256", "pem": "-----BEGIN PUBLIC KEY-----..."}]';
      return null;
    }
    const lifetime = byId<HTMLInputElement>('set-jwt_max_lifetime_s').value.trim();
    body.jwt_max_lifetime_s = lifetime === '' ? null : Number(lifetime);
    return body;
  }

  async function save(): Promise<void> {
    const e = editing;
    if (e === null) return;
    clearErrors();
    const body = readForm();
    if (body === null) {
      settingsError.textContent = 'Not saved: correct the field marked above.';
      return;
    }
    try {
      await api.patchEndpoint(e.id, body);
      settingsDialog.close();
      announce(`Restrictions of ${ctx.label(e)} saved`);
      await ctx.changed();
    } catch (err) {
      if (err instanceof ApiError && err.status === 400 && err.fields.length > 0) {
        const unplaced = err.fields.filter((p) => !placeProblem(p.field, p.message));
        settingsError.textContent = [
          'Not saved: correct the fields marked above.',
          ...unplaced.map((p) => `${p.field}: ${p.message}`),
        ].join(' ');
        return;
      }
      ctx.failed(err, settingsError);
    }
  }

  byId<HTMLFormElement>('settings-form').addEventListener('submit', (event) => {
    event.preventDefault();
    void save();
  });
  byId('settings-cancel').addEventListener('click', () => settingsDialog.close());
  settingsDialog.addEventListener('close', () => {
    editing = null;
    if (returnFocus?.isConnected) returnFocus.focus();
  });

  function rotate(e: Endpoint, from: HTMLElement): void {
    rotating = e;
    returnFocus = from;
    rotateError.textContent = '';
    byId('rotate-ask').hidden = false;
    byId('rotated').hidden = true;
    byId('rotate-title').textContent = `Rotate the key of “${ctx.label(e)}”?`;
    byId('rotate-text').textContent =
      `A new key replaces the current one (${e.key_prefix}…), which keeps working for the time you choose, so you can deploy the new one first; then it is refused and its open connections close.`;
    byId<HTMLSelectElement>('rotate-grace').value = '86400';
    rotateDialog.showModal();
    byId('rotate-grace').focus();
  }

  async function confirmRotate(): Promise<void> {
    const e = rotating;
    if (e === null) return;
    try {
      const made = await api.rotateKey(e.id, Number(byId<HTMLSelectElement>('rotate-grace').value));
      byId('rotated-key').textContent = made.api_key;
      byId('rotated-https').textContent = made.https_url;
      byId('rotated-previous').textContent =
        made.previous_key_expires_at === null
          ? `${e.key_prefix}… is refused from now on.`
          : `${e.key_prefix}… works until ${new Date(made.previous_key_expires_at).toLocaleString()}.`;
      byId('rotate-ask').hidden = true;
      byId('rotate-title').textContent = `The key of “${ctx.label(e)}” was rotated`;
      byId('rotate-text').textContent = '';
      byId('rotated').hidden = false;
      byId('rotated').focus();
      announce(`The key of ${ctx.label(e)} was rotated`);
      await ctx.changed();
    } catch (err) {
      ctx.failed(err, rotateError);
    }
  }

  byId('rotate-confirm').addEventListener('click', () => void confirmRotate());
  byId('rotate-cancel').addEventListener('click', () => rotateDialog.close());
  byId('rotated-done').addEventListener('click', () => rotateDialog.close());
  rotateDialog.addEventListener('close', () => {
    // The new key leaves the page: it was shown once.
    byId('rotated-key').textContent = '';
    byId('rotated-https').textContent = '';
    rotating = null;
    if (returnFocus?.isConnected) returnFocus.focus();
  });

  return { edit, rotate };
}
