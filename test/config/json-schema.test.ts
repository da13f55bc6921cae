/**
 * chaingate.schema.json, the JSON Schema editors check a config file with: the shipped file is what the
 * source writes, the example validates against it, and a wrong key fails naming its path.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { configJsonSchemaText, JSON_SCHEMA_FILE } from '../../src/config/json-schema.js';
import { schemaProblems, validateConfig } from '../../src/config/schema.js';

type Node = Record<string, unknown>;

const exampleText = readFileSync(new URL('../../config.example.yaml', import.meta.url), 'utf8');
const shipped = readFileSync(JSON_SCHEMA_FILE, 'utf8');

t.test('the shipped chaingate.schema.json is what the source writes (npm run build)', async (t) => {
  t.equal(shipped, configJsonSchemaText(), 'run `npm run build` (or `npx tsx src/config/json-schema.ts`) and commit the file');
});

t.test('config.example.yaml names the schema for editors, and validates against it', async (t) => {
  t.equal(exampleText.split('\n')[0], '# yaml-language-server: $schema=./chaingate.schema.json');
  t.same(schemaProblems(parseYaml(exampleText)), []);
});

/** Every key the document writes, as a path, that the shipped file does not declare where it is written. */
function undeclared(schema: Node, value: unknown, path: string): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => undeclared((schema.items ?? {}) as Node, v, `${path}[${i}]`));
  if (typeof value !== 'object' || value === null) return [];
  // A union of a section and a word (`methods: { deny } | 'auto'`): the section's keys are declared.
  const section = (schema.anyOf as Node[] | undefined)?.find((s) => s.properties !== undefined);
  if (section !== undefined) return undeclared(section, value, path);
  const properties = schema.properties as Record<string, Node> | undefined;
  const pattern = schema.patternProperties as Record<string, Node> | undefined;
  return Object.entries(value).flatMap(([k, v]) => {
    const child = properties?.[k] ?? (pattern ? Object.values(pattern)[0] : undefined);
    const at = path ? `${path}.${k}` : k;
    return child === undefined ? [at] : undeclared(child, v, at);
  });
}

t.test('every key of the example is declared in the shipped file, and none it leaves out is required there', async (t) => {
  const schema = JSON.parse(shipped) as Node;
  const example = parseYaml(exampleText) as Node;
  t.same(undeclared(schema, example, ''), []);
  t.same(undeclared(schema, { server: { colour: 'blue' } }, ''), ['server.colour'], 'the walk finds an unknown key');
  t.same(schema.required, ['chains'], 'only chains has no default at the top');
  const server = (schema.properties as Record<string, Node>).server as Node;
  t.equal(server.required, undefined, 'every server key has a default or may be left out');
  t.same(
    (server.properties as Record<string, Node>).port!.type,
    ['integer', 'null'],
    "YAML's empty `port:` is the default, as the loader reads it",
  );
});

t.test('a known-bad config fails naming each key path, in the schema alone and in the whole check', async (t) => {
  const bad = {
    server: { port: 70000, colour: 'blue' },
    chains: { devnet: { chain_id: 1, upstreams: [{ url: 'ftp://node' }] } },
    cache: { hit_ru_factor: 2 },
  };
  const expected = [
    'server.colour: unknown key (known: host, port, default_chain, public_base_url, max_body_bytes, max_batch, cors_origins, stop_timeout_s, trust_proxy, ipv6_prefix, tls, workers, max_connections, worker_max_heap_mb, worker_stall_s, worker_relay_max_bytes)',
    'server.port: must be an integer from 0 to 65535',
    'chains.devnet.upstreams[0].url: must be an http(s) URL',
    'cache.hit_ru_factor: must be a number from 0 to 1',
  ];
  t.same(schemaProblems(bad), expected);
  const whole = validateConfig(bad);
  t.same(whole.ok ? [] : whole.errors, expected);
});
