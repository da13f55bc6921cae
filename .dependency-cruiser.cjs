// The layers of src/, top to bottom: a module may import its own folder and any folder of a layer below
// its own, never one above or beside it. docs/layout.md explains each layer; `npm test` runs this check
// (npm run check:layers), so an upward import or a cycle between folders fails the suite.
const LAYERS = [
  ['main.ts'],
  ['cli', 'devnet'],
  ['server'],
  ['pipeline'],
  ['chain'],
  ['fanout', 'filters'],
  ['upstreams', 'alerts'],
  ['accounts'],
  ['tenancy'],
  // Below the key lookup, which reads and compiles an endpoint's restrictions with the grant it caches.
  ['fences'],
  ['config'],
  ['metering'],
  ['beacon', 'jsonrpc', 'limits', 'store'],
  ['errors.ts', 'repeated-log.ts', 'metrics'],
  ['log.ts', 'api-answers.ts'],
];

/** A path pattern for one entry of LAYERS: a folder's files, or a top-level file. */
const pattern = (name) => (name.endsWith('.ts') ? `^src/${name.replace('.', '\\.')}$` : `^src/${name}/`);

const upward = LAYERS.slice(1).flatMap((layer, below) =>
  layer.map((name) => ({
    name: `layers: ${name}`,
    comment: `${name} may import only its own folder and the layers below it`,
    severity: 'error',
    from: { path: pattern(name) },
    to: {
      path: LAYERS.slice(0, below + 2).flat().filter((other) => other !== name).map(pattern),
    },
  })),
);

/**
 * The one import against the layers: where a request's key is found (fences/credentials.ts) tells a key from
 * a token by the key's shape, which tenancy/keys.ts declares (a leaf module: node:crypto only, no cycle).
 */
const KEY_SHAPE = '^src/tenancy/keys\\.ts$';

module.exports = {
  forbidden: [
    ...upward.map((rule) =>
      rule.name === 'layers: fences' ? { ...rule, to: { ...rule.to, pathNot: KEY_SHAPE } } : rule,
    ),
    {
      name: 'no-circular',
      comment: 'a cycle of imports that run, inside a folder too, makes load order and ownership unclear (a type shared both ways is no cycle at run time)',
      severity: 'error',
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'layers: every module has a layer',
      comment: 'a new folder or top-level file of src/ gets its place in LAYERS (checked on its imports)',
      severity: 'error',
      from: {
        path: '^src/',
        pathNot: LAYERS.flat().map(pattern),
      },
      to: {},
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules)/' },
  },
};
