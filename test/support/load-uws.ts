// Run in a child process by the loader test: loads uWS through chaingate's loader and reports what happened.
import { loadUws } from '../../src/server/uws.js';

try {
  const builds = process.argv[2] ? process.argv[2].split(',') : undefined;
  const mod = loadUws(builds);
  process.stdout.write(JSON.stringify({ ok: true, hasSSLApp: typeof mod.SSLApp === 'function' }));
} catch (err) {
  process.stdout.write(JSON.stringify({ ok: false, message: (err as Error).message }));
}
