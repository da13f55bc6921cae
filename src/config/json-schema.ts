/**
 * chaingate.schema.json, the JSON Schema editors check a config file with (config.example.yaml names it
 * in its `yaml-language-server` comment), written from ConfigSchema by `npm run build`
 * (`node dist/config/json-schema.js`); test/config/json-schema.test.ts checks the shipped file is what
 * the source writes.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ConfigSchema } from './schema.js';

type Node = Record<string, unknown>;

/**
 * A key with a default may be left out, and YAML's `key:` with nothing after it (null) leaves any key
 * that may be left out at its default: the loader reads both so, and so must the editor.
 */
function forEditors(node: Node): Node {
  for (const v of Object.values(node)) {
    if (Array.isArray(v)) for (const x of v) if (typeof x === 'object' && x !== null) forEditors(x as Node);
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) forEditors(v as Node);
  }
  const properties = node.properties as Record<string, Node> | undefined;
  if (properties === undefined) return node;
  const required = ((node.required as string[] | undefined) ?? []).filter((k) => properties[k]?.default === undefined);
  if (required.length > 0) node.required = required;
  else delete node.required;
  for (const [k, p] of Object.entries(properties)) {
    if (required.includes(k)) continue;
    if (typeof p.type === 'string') p.type = [p.type, 'null'];
    else if (Array.isArray(p.anyOf)) p.anyOf = [...p.anyOf, { type: 'null' }];
  }
  return node;
}

/** The JSON Schema as written to chaingate.schema.json: the declarations (symbols, which carry messages, dropped). */
export function configJsonSchemaText(): string {
  const plain = JSON.parse(JSON.stringify(ConfigSchema)) as Node;
  const schema = { $schema: 'http://json-schema.org/draft-07/schema#', ...forEditors(plain) };
  return `${JSON.stringify(schema, null, 2)}\n`;
}

/** Where the package ships it: beside config.example.yaml (from src/config/ or dist/config/ alike). */
export const JSON_SCHEMA_FILE = fileURLToPath(new URL('../../chaingate.schema.json', import.meta.url));

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(JSON_SCHEMA_FILE, configJsonSchemaText());
}
