import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { ERRORS, managementErrorBody } from '../errors.js';
import { closesConnection, endHead, JSON_TYPE, responseMeta, sendWhole, writeHead } from './respond.js';
import type { HttpRequest, HttpResponse, TemplatedApp } from './uws.js';

/**
 * The owners' dashboard: the single-page app `npm run build` writes to dist/dashboard/ (its sources are
 * dashboard/), served at /dashboard by the listener that serves the management API. The files are read
 * once at start and kept in memory with their gzip form: a few tens of KB, never changed while running.
 */

/**
 * Where the build writes the app. Two folders up from this module is the package's root both when it
 * runs compiled (dist/server/) and from its source (src/server/, the tests).
 */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../dist/dashboard/', import.meta.url));

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * The page loads only its own files and talks only to its own origin (the management API beside it); no
 * inline script or style, no frame may hold it (clickjacking a signed-in owner into deleting endpoints).
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * Sent with every dashboard file, beside the `nosniff` of every answer (respond.ts). No CORS header: other
 * origins have no business reading the app.
 */
const SECURITY_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['content-security-policy', DASHBOARD_CSP],
  ['x-frame-options', 'DENY'],
  ['referrer-policy', 'no-referrer'],
  ['cross-origin-opener-policy', 'same-origin'],
  // Small files that change with each build under the same names: revalidated, never served stale.
  ['cache-control', 'no-cache'],
];

interface Asset {
  type: string;
  body: Buffer;
  gzipped: Buffer;
}

/** The app's files by URL path (`/dashboard` for the page itself); empty when the app was not built. */
export type DashboardAssets = ReadonlyMap<string, Asset>;

export function loadDashboardAssets(dir: string = DASHBOARD_DIR): DashboardAssets {
  const assets = new Map<string, Asset>();
  if (!existsSync(dir)) return assets;
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (type === undefined) continue;
    const body = readFileSync(`${dir}/${name}`);
    const asset = { type, body, gzipped: gzipSync(body, { level: 9 }) };
    assets.set(`/dashboard/${name}`, asset);
    if (name === 'index.html') assets.set('/dashboard', asset).set('/dashboard/', asset);
  }
  return assets;
}

/** Whether an Accept-Encoding header takes gzip (named, and not with q=0). */
function acceptsGzip(header: string): boolean {
  return header.split(',').some((part) => {
    const [coding, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    if (coding !== 'gzip') return false;
    const q = params.find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

function serveAsset(assets: DashboardAssets, res: HttpResponse, req: HttpRequest, headOnly: boolean): void {
  const path = req.getUrl();
  const asset = assets.get(path);
  const meta = responseMeta(req, undefined);
  if (asset === undefined) {
    const message = assets.size === 0 ? 'The dashboard is not built: run npm run build' : `No route for ${path}`;
    sendWhole(res, ERRORS.not_found.http, meta, JSON_TYPE, managementErrorBody('not_found', message), SECURITY_HEADERS);
    return;
  }
  const gzip = acceptsGzip(req.getHeader('accept-encoding'));
  res.cork(() => {
    writeHead(res, 200, meta, asset.type);
    for (const [name, value] of SECURITY_HEADERS) res.writeHeader(name, value);
    res.writeHeader('vary', 'Accept-Encoding');
    if (gzip) res.writeHeader('content-encoding', 'gzip');
    if (headOnly) endHead(res, meta);
    else res.end(gzip ? asset.gzipped : asset.body, closesConnection(meta));
  });
}

/** Serves the dashboard on `app` (GET and HEAD of /dashboard and its files). */
export function routeDashboard(app: TemplatedApp, assets: DashboardAssets): void {
  for (const pattern of ['/dashboard', '/dashboard/*']) {
    app.get(pattern, (res, req) => serveAsset(assets, res, req, false));
    app.head(pattern, (res, req) => serveAsset(assets, res, req, true));
  }
}
