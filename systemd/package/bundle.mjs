/**
 * Bundles the built daemon (dist/main.js and its worker threads' script) with its pure-JavaScript
 * dependencies into dist/bundle/, for the packed tarball. Installed from npm as they are, those
 * dependencies weigh some 80 MB (ethers, OpenTelemetry, lodestar's SSZ types, each in several module
 * formats with sources and maps); bundled, the few hundred kilobytes the daemon uses. Left outside
 * (EXTERNAL, installed as dependencies): the native better-sqlite3, and the packages the daemon loads by
 * name at run time.
 */
import { rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { build } from 'esbuild';

/**
 * better-sqlite3 is native; pino, prom-client, ioredis and ws are loaded with createRequire (only when
 * used: the CLI starts without them), pg by import() (and it requires pg-native when present).
 */
export const EXTERNAL = ['better-sqlite3', 'pg', 'ioredis', 'pino', 'prom-client', 'ws'];

/**
 * Modules find their files (the dashboard, the schema, the vendored uWS, package.json) relative to
 * `import.meta.url`. In a bundle that would be the bundle's own file, so each module's is replaced by the
 * URL its unbundled file has in dist/ (the bundle finds dist/ from its own URL). The one exception is
 * server/app.js, whose worker-thread script must be the bundled one, next to it in dist/bundle/server/.
 */
function moduleUrls(dist) {
  return {
    name: 'module-urls',
    setup(b) {
      b.onLoad({ filter: /\.js$/ }, async (args) => {
        if (!args.path.startsWith(dist + sep)) return undefined;
        let rel = relative(dist, args.path).split(sep).join('/');
        if (rel === 'server/app.js') rel = 'bundle/server/app.js';
        const text = await readFile(args.path, 'utf8');
        return { contents: text.replaceAll('import.meta.url', `(__chaingateDist + ${JSON.stringify(rel)})`), loader: 'js' };
      });
    },
  };
}

/**
 * Every output file starts with this: dist/'s URL, found from the file's own place under dist/bundle/,
 * and a `require` for the CommonJS dependencies bundled into ES modules (their require('node:events')).
 */
const BANNER = [
  "import { createRequire as __chaingateCreateRequire } from 'node:module';",
  'const require = __chaingateCreateRequire(import.meta.url);',
  "const __chaingateDist = import.meta.url.slice(0, import.meta.url.lastIndexOf('/dist/bundle/') + '/dist/'.length);",
].join('\n');

export async function bundle(root) {
  const dist = join(root, 'dist');
  rmSync(join(dist, 'bundle'), { recursive: true, force: true });
  await build({
    absWorkingDir: root,
    entryPoints: { main: 'dist/main.js', 'server/worker-thread': 'dist/server/worker-thread.js' },
    outdir: 'dist/bundle',
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: EXTERNAL,
    banner: { js: BANNER },
    plugins: [moduleUrls(dist)],
    legalComments: 'linked',
    logLevel: 'warning',
  });
}
