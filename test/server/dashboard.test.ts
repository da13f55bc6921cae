/**
 * Serving the dashboard's files: what each answer carries (type, CSP, frame and cache headers, gzip when
 * asked), HEAD, a file that is not there, a build that was not made; and the budget of the built app,
 * measured on dist/dashboard/ as `npm run build` writes it.
 */
import t, { type Test } from 'tap';
import { get } from 'node:http';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { DASHBOARD_CSP, DASHBOARD_DIR, loadDashboardAssets, routeDashboard } from '../../src/server/dashboard.js';
import { closeApp, uws } from '../../src/server/uws.js';
import { send } from '../support/rpc.js';

/** An app serving `dir` as the dashboard, on a free port; closed at teardown. */
async function serve(t: Test, dir: string): Promise<string> {
  const app = uws().App();
  routeDashboard(app, loadDashboardAssets(dir));
  const port = await new Promise<number>((resolve, reject) =>
    app.listen('127.0.0.1', 0, (socket) => (socket ? resolve(uws().us_socket_local_port(socket)) : reject(new Error('cannot listen')))),
  );
  t.teardown(() => closeApp(app));
  return `http://127.0.0.1:${port}`;
}

function builtApp(t: Test): string {
  const dir = join(tmpdir(), `chaingate-dashboard-${process.pid}-${Math.random().toString(36).slice(2)}`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>x</title>');
  writeFileSync(join(dir, 'app.js'), `console.log(${JSON.stringify('y'.repeat(2000))});`);
  writeFileSync(join(dir, 'notes.txt'), 'not served');
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

t.test('the page and its files, with their headers', async (t) => {
  const base = await serve(t, builtApp(t));
  for (const path of ['/dashboard', '/dashboard/', '/dashboard/index.html']) {
    const page = await send('GET', `${base}${path}`);
    t.equal(page.status, 200, path);
    t.equal(page.text, '<!doctype html><title>x</title>');
    t.equal(page.headers['content-type'], 'text/html; charset=utf-8');
    t.equal(page.headers['content-security-policy'], DASHBOARD_CSP);
    t.equal(page.headers['x-frame-options'], 'DENY');
    t.equal(page.headers['x-content-type-options'], 'nosniff');
    t.equal(page.headers['cache-control'], 'no-cache');
    t.equal(page.headers['access-control-allow-origin'], undefined, 'no CORS: other origins do not read the app');
  }
  t.match(DASHBOARD_CSP, /default-src 'none'/);
  t.notMatch(DASHBOARD_CSP, /unsafe/);
  const script = await send('GET', `${base}/dashboard/app.js`);
  t.equal(script.headers['content-type'], 'text/javascript; charset=utf-8');
  t.equal(script.headers['content-encoding'], undefined, 'plain when gzip is not asked for');
  const zipped = await send('GET', `${base}/dashboard/app.js`, undefined, { 'accept-encoding': 'br, gzip;q=0.8' });
  t.equal(zipped.headers['content-encoding'], 'gzip');
  t.equal(zipped.headers.vary, 'Accept-Encoding');
  const refused = await send('GET', `${base}/dashboard/app.js`, undefined, { 'accept-encoding': 'gzip;q=0, br' });
  t.equal(refused.headers['content-encoding'], undefined, 'gzip;q=0 is a refusal');
  const head = await send('HEAD', `${base}/dashboard`);
  t.equal(head.status, 200);
  t.equal(head.text, '');
  t.equal(head.headers['content-security-policy'], DASHBOARD_CSP);
  const other = await send('GET', `${base}/dashboard/notes.txt`);
  t.equal(other.status, 404, 'only the app’s own kinds of file');
  t.same(other.json, { error: { code: 'not_found', message: 'No route for /dashboard/notes.txt' } });
  t.equal(other.headers['content-security-policy'], DASHBOARD_CSP);
});

t.test('a gzip answer is the file itself', async (t) => {
  const dir = builtApp(t);
  const base = await serve(t, dir);
  const raw = await new Promise<Buffer>((resolve, reject) => {
    get(`${base}/dashboard/app.js`, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks)));
      res.on('error', reject);
    }).on('error', reject);
  });
  t.same(gunzipSync(raw), readFileSync(join(dir, 'app.js')));
});

t.test('without a build, the page says how to make one', async (t) => {
  const base = await serve(t, join(tmpdir(), 'chaingate-no-such-dashboard'));
  const page = await send('GET', `${base}/dashboard`);
  t.equal(page.status, 404);
  t.same(page.json, { error: { code: 'not_found', message: 'The dashboard is not built: run npm run build' } });
});

t.test('the built app weighs at most 150 KB gzipped', async (t) => {
  let files: string[];
  try {
    files = readdirSync(DASHBOARD_DIR);
  } catch {
    throw new Error(`${DASHBOARD_DIR} is missing: run npm run build first`);
  }
  t.ok(files.includes('index.html') && files.includes('app.js') && files.includes('app.css'), 'the page, its script and its styles');
  let total = 0;
  for (const file of files) total += gzipSync(readFileSync(join(DASHBOARD_DIR, file)), { level: 9 }).length;
  t.ok(total <= 150 * 1024, `${total} bytes gzipped`);
  // The page's own assets only: nothing it names lives on another origin.
  const html = readFileSync(join(DASHBOARD_DIR, 'index.html'), 'utf8');
  t.same(
    [...html.matchAll(/(?:src|href)="([^"#]+)"/g)].map((m) => m[1]!).filter((u) => !u.startsWith('/dashboard/')),
    [],
  );
});
