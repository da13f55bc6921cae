/**
 * The management key, kept in sessionStorage only: it lives as long as the tab, is never written to
 * localStorage, a cookie or the address, and is sent only as the Bearer header of the API's requests.
 */
const STORAGE_KEY = 'chaingate.managementKey';

export function readKey(): string | null {
  return sessionStorage.getItem(STORAGE_KEY);
}

export function saveKey(key: string): void {
  sessionStorage.setItem(STORAGE_KEY, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}
