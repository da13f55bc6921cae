import t from 'tap';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('../support/load-uws.ts', import.meta.url));

function load(env: Record<string, string>, builds?: string): { ok: boolean; message?: string; hasSSLApp?: boolean } {
  // The child runs with this process's loader flags so it can import the TypeScript source.
  const out = execFileSync(process.execPath, [...process.execArgv, script, ...(builds ? [builds] : [])], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });
  return JSON.parse(out) as { ok: boolean; message?: string; hasSSLApp?: boolean };
}

t.test('the loader gives the native build on this host', async (t) => {
  const r = load({});
  t.same(r, { ok: true, hasSSLApp: true });
});

t.test('the loader refuses the pure-JS stand-in and names Node and glibc', async (t) => {
  // UWS_USE_FALLBACK makes the trufflesuite package hand out its JS stand-in, as it does on a host without a binary.
  const r = load({ UWS_USE_FALLBACK: '1' }, '@trufflesuite/uws-js-unofficial');
  t.equal(r.ok, false);
  t.match(r.message, /needs a native uWebSockets\.js build/);
  t.match(r.message, new RegExp(`Node ${process.version.replace(/\./g, '\\.')}`));
  t.match(r.message, /glibc \d+\.\d+/);
  t.match(r.message, /@trufflesuite\/uws-js-unofficial: no native binary/);
});

t.test('a build that does not exist is reported, and the next one is tried', async (t) => {
  const r = load({}, '@chaingate/no-such-uws,@trufflesuite/uws-js-unofficial');
  t.same(r, { ok: true, hasSSLApp: true });
  const none = load({}, '@chaingate/no-such-uws');
  t.equal(none.ok, false);
  t.match(none.message, /@chaingate\/no-such-uws: Cannot find module/);
});
