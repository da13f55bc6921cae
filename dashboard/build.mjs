/**
 * `npm run build` (after tsc): bundles the owners' dashboard into dist/dashboard/, which the daemon serves
 * at /dashboard (src/server/dashboard.ts). One script and one stylesheet, uPlot included, so the page
 * needs nothing from another origin; index.html and the icon are copied as they are.
 */
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = 'dist/dashboard';

rmSync(`${root}/${out}`, { recursive: true, force: true });
mkdirSync(`${root}/${out}`, { recursive: true });
await build({
  absWorkingDir: root,
  entryPoints: { app: 'dashboard/src/main.ts' },
  bundle: true,
  minify: true,
  format: 'esm',
  // Browsers of the last few years; `<script type="module">` already leaves older ones out.
  target: ['chrome100', 'firefox100', 'safari15'],
  outdir: out,
  legalComments: 'eof',
  logLevel: 'warning',
});
for (const file of ['index.html', 'favicon.svg']) copyFileSync(`${root}/dashboard/${file}`, `${root}/${out}/${file}`);
