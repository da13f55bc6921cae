/**
 * The build bundles the schema library into one file (src/config/typebox.ts says why: 266 ES modules
 * kept 8 MB resident for the life of the process). The built file must stand alone, or the gateway
 * would load the library's modules after all.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const BUILT = fileURLToPath(new URL('../../dist/config/typebox.js', import.meta.url));

t.test('dist/config/typebox.js is one file that imports nothing of the library', async (t) => {
  const text = readFileSync(BUILT, 'utf8');
  t.notMatch(text, /(?:from|import)\s*\(?\s*["']@sinclair\//, 'no import of @sinclair/typebox is left');
  const bundled = (await import(BUILT)) as typeof import('../../src/config/typebox.js');
  const schema = bundled.Type.Object({ port: bundled.Type.Integer({ minimum: 0 }) });
  t.same(
    [...bundled.Errors(schema, { port: -1 })].map((e) => e.path),
    ['/port'],
    'and it validates: the bundled Type and Errors work together',
  );
});
