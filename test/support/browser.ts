/**
 * A headless Chromium for the dashboard's test: Debian's `chromium` package (test/setup/servers.ts installs
 * it), driven by playwright-core, which never downloads a browser of its own.
 */
import type { Test } from 'tap';
import { type Browser, chromium } from 'playwright-core';

/** Where Debian's package puts the browser. */
export const CHROMIUM = '/usr/bin/chromium';

export async function browserFor(t: Test): Promise<Browser> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
  t.teardown(() => browser.close());
  return browser;
}
