import t from 'tap';
import { readFileSync } from 'node:fs';
import { loadConfigText } from '../../src/config/load.js';
import { validateConfig } from '../../src/config/schema.js';
import { HEAVY_METHODS } from '../../src/jsonrpc/methods.js';

const minimal = `
chains:
  devnet:
    chain_id: 31337
    upstreams: [{ url: "http://127.0.0.1:8545" }]
`;

t.test('a minimal config gets every default', async (t) => {
  const r = loadConfigText(minimal);
  t.ok(r.ok);
  if (!r.ok) return;
  t.equal(r.config.server.port, 8080);
  t.equal(r.config.server.host, '127.0.0.1');
  t.equal(r.config.server.default_chain, 'devnet');
  t.equal(r.config.server.public_base_url, 'http://127.0.0.1:8080/{chain}');
  t.equal(r.config.server.max_body_bytes, 1048576);
  t.equal(r.config.server.max_batch, 1000);
  t.same(r.config.server.cors_origins, ['*']);
  t.equal(r.config.storage.path, './data/chaingate.db');
  t.equal(r.config.chains.devnet!.timeout_s, 30);
  t.equal(r.config.chains.devnet!.kind, 'evm');
  t.equal(r.config.chains.devnet!.upstreams[0]!.max_connections, 64);
  t.equal(r.config.chains.devnet!.upstreams[0]!.pipelining, 8);
  t.ok(Object.isFrozen(r.config.chains.devnet!.upstreams[0]), 'deep-frozen');
  t.same(r.config.plans.free, { name: 'free', rps: 100, ru_per_second: undefined, max_endpoints: 10, methods: { deny: [] } });
  t.same(r.config.plans.premium, { name: 'premium', rps: 5000, ru_per_second: 500000, max_endpoints: 200, methods: { deny: [] } });
  t.same(
    r.config.public,
    { rps_per_ip: 10, max_batch: 10, methods: { deny: HEAVY_METHODS } },
    'the keyless path denies the heavy methods (listed in method-policy.test.ts)',
  );
  t.same(r.config.chains.devnet!.methods, { allow: undefined, deny: [] });
  t.same(r.config.chains.devnet!.ru, { methods: {}, default: undefined });
  t.equal(r.config.chains.devnet!.state_history_blocks, 128);
  t.same(r.config.chains.devnet!.upstreams[0]!.methods, { deny: [] });
  t.equal(r.config.chains.devnet!.upstreams[0]!.archive, false);
  t.same(r.config.ru, { default: 15, methods: {}, notification_per_250_bytes: 5, beacon: { default: 20, per_event: 1, paths: {} } });
  t.same(r.config.websocket, {
    max_connections_per_key: 100,
    max_connections_per_ip: 50,
    max_subscriptions_per_connection: 100,
    max_message_bytes: 1048576,
    max_answer_bytes: 33554432,
    max_buffered_bytes: 1048576,
    idle_timeout_s: 120,
    max_upstream_outage_s: 60,
  });
  t.same(r.config.sse, { heartbeat_s: 15, max_buffered_bytes: 1048576, max_connections_per_key: 100, max_connections_per_ip: 50 });
  t.same(r.config.cache, { max_bytes: 67108864, hit_ru_factor: 0.5 });
  t.same(r.config.filters, { max_per_key: 100, idle_timeout_s: 300 });
  t.equal(r.config.chains.devnet!.max_lag_blocks, 5);
  t.equal(r.config.chains.devnet!.finality_depth, 64);
  t.equal(r.config.chains.devnet!.max_logs_block_range, 10000);
  t.same(r.config.ledger, { flush_interval_ms: 200 });
  t.same(r.config.usage, { keep_minutes_h: 48, keep_hours_d: 90, failures_kept: 100 });
  t.equal(r.config.management, undefined);
  t.same(r.config.management_limits, { rps_per_key: 20, rps_per_ip: 50 });
});

t.test('management: rates with or without a listener of its own', async (t) => {
  const limitsOnly = loadConfigText(`${minimal}management: { rps_per_key: 5, rps_per_ip: 9 }\n`);
  t.ok(limitsOnly.ok);
  if (limitsOnly.ok) {
    t.equal(limitsOnly.config.management, undefined, 'no port: served on the main listener');
    t.same(limitsOnly.config.management_limits, { rps_per_key: 5, rps_per_ip: 9 });
  }
  const listener = loadConfigText(`${minimal}management: { port: 8081 }\n`);
  t.ok(listener.ok);
  if (listener.ok) t.same(listener.config.management, { host: '127.0.0.1', port: 8081 });
  const bad = loadConfigText(`${minimal}management: { host: 0.0.0.0, rps_per_key: 0, rps_per_ip: x }\n`);
  t.notOk(bad.ok);
  if (!bad.ok) {
    t.match(bad.errors.join('\n'), /management\.host: needs management\.port/);
    t.match(bad.errors.join('\n'), /management\.rps_per_key: must be an integer from 1/);
    t.match(bad.errors.join('\n'), /management\.rps_per_ip: must be an integer from 1/);
  }
});

t.test('server.ipv6_prefix: 64 by default, any prefix length from 1 to 128, else an error naming it', async (t) => {
  const r = loadConfigText(minimal);
  t.equal(r.ok && r.config.server.ipv6_prefix, 64);
  for (const ok of [1, 48, 56, 128]) {
    const c = loadConfigText(`${minimal}server: { ipv6_prefix: ${ok} }\n`);
    t.equal(c.ok && c.config.server.ipv6_prefix, ok, `${ok}`);
  }
  for (const bad of ['0', '129', '64.5', '"64"', '-64']) {
    const c = loadConfigText(`${minimal}server: { ipv6_prefix: ${bad} }\n`);
    t.same(c.ok ? [] : c.errors, ['server.ipv6_prefix: must be an integer from 1 to 128'], bad);
  }
});

t.test('fences.contracts_cover_balance: false by default, a boolean, else an error naming it', async (t) => {
  const r = loadConfigText(minimal);
  t.same(r.ok && r.config.fences, { contracts_cover_balance: false });
  const on = loadConfigText(`${minimal}fences: { contracts_cover_balance: true }\n`);
  t.equal(on.ok && on.config.fences.contracts_cover_balance, true);
  const bad = loadConfigText(`${minimal}fences: { contracts_cover_balance: sometimes, cover_everything: true }\n`);
  t.notOk(bad.ok);
  if (!bad.ok) {
    t.match(bad.errors.join('\n'), /fences\.contracts_cover_balance: must be true or false/);
    t.match(bad.errors.join('\n'), /fences\.cover_everything: unknown key/);
  }
});

t.test('config.example.yaml is valid as shipped', async (t) => {
  const r = loadConfigText(readFileSync(new URL('../../config.example.yaml', import.meta.url), 'utf8'));
  t.same(r.ok ? [] : r.errors, []);
});

t.test('every error is listed at once with its key path', async (t) => {
  const r = loadConfigText(`
server:
  port: 70000
  max_batch: 0
  colour: blue
  trust_proxy: "yes"
chains:
  mainnet:
    chain_id: 1
    upstreams:
      - url: "ftp://node"
      - url: "http://ok:8545"
        ws: "http://not-ws"
        headers: { "Bad Header": x }
  v1:
    chain_id: 2
    upstreams: [{ url: "http://a" }]
  Upper:
    chain_id: 3
    upstreams: []
  beacon-one:
    kind: beacon
    chain_id: 5
    upstreams: [{ url: "http://b", ws: "ws://b" }]
  nochainid:
    upstreams: [{ url: "http://c" }]
`);
  t.notOk(r.ok);
  if (r.ok) return;
  const expected = [
    'chains.mainnet.upstreams[0].url: must be an http(s) URL',
    'chains.mainnet.upstreams[1].ws: must be a ws(s) URL',
    'chains.mainnet.upstreams[1].headers.Bad Header: not a valid header name',
    "chains.v1: 'v1' is a path the gateway uses itself; pick another slug",
    "chains.Upper: a slug is lowercase letters, digits and '-' (at most 63)",
    'chains.Upper.upstreams: must list at least one upstream',
    'chains.beacon-one.chain_id: belongs to evm chains; a beacon chain has none',
    'chains.beacon-one.upstreams[0].ws: beacon chains have no WebSocket upstream',
    'chains.nochainid.chain_id: required for an evm chain',
    'server.colour: unknown key (known: host, port, default_chain, public_base_url, max_body_bytes, max_batch, cors_origins, stop_timeout_s, trust_proxy, ipv6_prefix, tls, workers, max_connections, worker_max_heap_mb, worker_stall_s, worker_relay_max_bytes)',
    'server.port: must be an integer from 0 to 65535',
    'server.max_batch: must be an integer from 1 to 100000',
    'server.trust_proxy: must be true or false',
    'server.default_chain: required when more than one chain is configured (mainnet, v1, Upper, beacon-one, nochainid)',
  ];
  for (const e of expected) t.ok(r.errors.includes(e), e);
  t.equal(r.errors.length, expected.length, r.errors.join('\n'));
});

// biome-ignore lint/suspicious/noTemplateCurlyInString: the test names the config's ${ENV} syntax
t.test('${ENV} interpolation in values, with unset variables reported', async (t) => {
  const text = `
chains:
  devnet:
    chain_id: 31337
    upstreams:
      - url: "http://127.0.0.1:8545/\${NODE_KEY}"
        headers: { Authorization: "Bearer \${NODE_TOKEN}", X-Literal: "$\${KEEP}" }
`;
  const r = loadConfigText(text, { NODE_KEY: 'k123', NODE_TOKEN: 'tok' });
  t.ok(r.ok);
  if (r.ok) {
    const up = r.config.chains.devnet!.upstreams[0]!;
    t.equal(up.url, 'http://127.0.0.1:8545/k123');
    // biome-ignore lint/suspicious/noTemplateCurlyInString: $${KEEP} in the YAML leaves the literal ${KEEP}
    t.same(up.headers, { Authorization: 'Bearer tok', 'X-Literal': '${KEEP}' });
  }
  const missing = loadConfigText(text, { NODE_KEY: 'k' });
  t.notOk(missing.ok);
  if (!missing.ok) t.same(missing.errors, ['chains.devnet.upstreams[0].headers.Authorization: environment variable NODE_TOKEN is not set']);
});

t.test('YAML syntax errors and duplicate keys are reported, complete: file, line, column, what is wrong', async (t) => {
  const r = loadConfigText('chains: [\n');
  t.notOk(r.ok);
  if (!r.ok) t.match(r.errors[0], /^YAML: line \d+, column \d+: \S/);
  const dup = loadConfigText('server:\n  port: 1\n  port: 2\n', process.env, undefined, '/etc/chaingate/config.yaml');
  t.same(dup.ok ? [] : dup.errors, ['YAML: /etc/chaingate/config.yaml, line 3, column 3: Map keys must be unique']);
  // The parser's message ends on "at line L, column C:" before a snippet of the text, which may hold a secret.
  const compact = loadConfigText('server: { port: 1\nupstreams: [{ url: "http://user:s3cret@node" }]\n');
  t.notOk(compact.ok);
  if (!compact.ok) {
    t.match(compact.errors[0], /^YAML: line \d+, column \d+: [^\n]*[^:\n]$/, 'one line, no dangling colon');
    t.notMatch(compact.errors[0], 's3cret', 'no line of the file is quoted');
  }
});

t.test('tls and public_base_url rules', async (t) => {
  const r = loadConfigText(minimal + 'server:\n  tls: { cert_file: /x }\n  public_base_url: "not a url"\n');
  t.notOk(r.ok);
  if (!r.ok) {
    t.ok(r.errors.includes('server.tls.key_file: required with server.tls'));
    t.ok(r.errors.includes('server.public_base_url: must be an http(s) URL'));
  }
  const ok = loadConfigText(minimal + 'server:\n  port: 8443\n  tls: { cert_file: /c, key_file: /k }\n');
  t.ok(ok.ok);
  if (ok.ok) t.equal(ok.config.server.public_base_url, 'https://127.0.0.1:8443/{chain}');
});

t.test('a plans section replaces the default plans as a whole, and is validated', async (t) => {
  const r = loadConfigText(minimal + 'plans:\n  gold: { rps: 50, ru_per_second: 1000, max_endpoints: 3 }\n');
  t.ok(r.ok);
  if (r.ok) t.same(Object.keys(r.config.plans), ['gold']);
  const bad = loadConfigText(
    minimal + 'plans:\n  gold: { ru_per_second: 0, colour: red }\nru:\n  methods: { eth_call: -1 }\nledger: { flush_interval_ms: 1 }\n',
  );
  t.notOk(bad.ok);
  if (!bad.ok) {
    for (const e of [
      'plans.gold.colour: unknown key (known: rps, ru_per_second, max_endpoints, methods, method_limits)',
      'plans.gold.rps: required',
      'plans.gold.ru_per_second: must be an integer from 1 to 1000000000',
      'ru.methods.eth_call: must be an integer from 0 to 1000000',
      'ledger.flush_interval_ms: must be an integer from 10 to 60000',
    ])
      t.ok(bad.errors.includes(e), e);
  }
});

t.test('the streaming sections and per-chain health keys are validated, each error naming its key', async (t) => {
  const ok = loadConfigText(
    minimal.replace('chain_id: 31337', 'chain_id: 31337\n    max_lag_blocks: 2\n    finality_depth: 12') +
      'websocket: { max_message_bytes: 4096 }\nru: { beacon: { paths: { "/eth/v2/beacon/blocks/{block_id}": 100 } } }\n',
  );
  t.same(ok.ok ? [] : ok.errors, []);
  if (ok.ok) {
    t.equal(ok.config.websocket.max_message_bytes, 4096);
    t.equal(ok.config.chains.devnet!.max_lag_blocks, 2);
    t.equal(ok.config.ru.beacon.paths['/eth/v2/beacon/blocks/{block_id}'], 100);
  }
  const bad = loadConfigText(
    minimal.replace('chain_id: 31337', 'chain_id: 31337\n    finality_depth: 0') +
      'websocket: { idle_timeout_s: 2, colour: red }\nsse: { heartbeat_s: 0 }\ncache: { hit_ru_factor: 2 }\nfilters: { max_per_key: 0 }\n' +
      'ru: { notification_per_250_bytes: -1, beacon: { paths: { "/eth/v9/nothing": 5 } } }\n',
  );
  t.notOk(bad.ok);
  if (!bad.ok) {
    for (const e of [
      'chains.devnet.finality_depth: must be an integer from 1 to 1000000',
      'websocket.idle_timeout_s: must be an integer from 8 to 960',
      'sse.heartbeat_s: must be an integer from 1 to 3600',
      'cache.hit_ru_factor: must be a number from 0 to 1',
      'filters.max_per_key: must be an integer from 1 to 100000',
      'ru.notification_per_250_bytes: must be an integer from 0 to 1000000',
    ])
      t.ok(bad.errors.includes(e), e);
    t.ok(
      bad.errors.some((e) => e.startsWith('websocket.colour: unknown key')),
      'unknown websocket key',
    );
    t.ok(
      bad.errors.some((e) => e.startsWith('ru.beacon.paths./eth/v9/nothing: not a Beacon route')),
      'unknown Beacon cost path',
    );
  }
});

t.test('rules across keys: ru.methods names the allowlist, chain ids differ, the management port is its own', async (t) => {
  const two = `
chains:
  alpha: { chain_id: 1, upstreams: [{ url: "http://a" }] }
  beta: { chain_id: 1, upstreams: [{ url: "http://b" }] }
  gamma: { chain_id: 1, upstreams: [{ url: "http://c" }] }
  beacon: { kind: beacon, upstreams: [{ url: "http://d" }] }
server: { default_chain: alpha, port: 9000 }
management: { port: 9000 }
ru:
  methods: { eth_call: 30, eth_getlogs: 5, debug_setHead: 100 }
`;
  const bad = loadConfigText(two);
  t.notOk(bad.ok);
  if (!bad.ok) {
    t.same(bad.errors, [
      'ru.methods.eth_getlogs: not a method the gateway serves (did you mean eth_getLogs?)',
      'ru.methods.debug_setHead: not a method the gateway serves (names are case-sensitive, e.g. eth_getLogs)',
      'chains.beta.chain_id: 1 is already the chain_id of chains.alpha; each chain needs its own',
      'chains.gamma.chain_id: 1 is already the chain_id of chains.alpha; each chain needs its own',
      'management.port: 9000 is also server.port on 127.0.0.1; the management listener needs a port of its own',
    ]);
  }
  const wildcard = loadConfigText(minimal + 'server: { host: 0.0.0.0, port: 9000 }\nmanagement: { host: 10.0.0.1, port: 9000 }\n');
  t.same(
    wildcard.ok ? [] : wildcard.errors,
    ['management.port: 9000 is also server.port on 0.0.0.0; the management listener needs a port of its own'],
    'a wildcard listener takes the port on every address',
  );
  for (const [what, extra] of [
    ['two specific addresses may share a port', 'server: { host: 10.0.0.1, port: 9000 }\nmanagement: { host: 127.0.0.1, port: 9000 }\n'],
    ['port 0 is any free port, twice', 'server: { port: 0 }\nmanagement: { port: 0 }\n'],
    ['served methods take costs', 'ru: { methods: { eth_getLogs: 70, eth_subscribe: 12 } }\n'],
  ] as const) {
    const ok = loadConfigText(minimal + extra);
    t.same(ok.ok ? [] : ok.errors, [], what);
  }
  const invalidIds = loadConfigText(
    two
      .replace(/chain_id: 1/g, 'chain_id: 0')
      .replace('management: { port: 9000 }', '')
      .replace(/ru:\n.*\n/, ''),
  );
  t.same(
    invalidIds.ok ? [] : invalidIds.errors.filter((e) => e.includes('already')),
    [],
    'an out-of-range chain_id is not also called a duplicate',
  );
});

t.test('operations: log and metrics sections, upstream names', async (t) => {
  const r = loadConfigText(minimal);
  t.ok(r.ok);
  if (!r.ok) return;
  t.same(r.config.log, { level: 'info', access: false, access_sample: 1 }, 'log defaults');
  t.same(r.config.metrics, { host: '127.0.0.1', port: 9464, token: undefined }, 'an absent metrics section is the default listener');
  t.equal(r.config.chains.devnet!.upstreams[0]!.name, '127.0.0.1:8545', 'an upstream is named host:port by default');

  const https = loadConfigText(minimal.replace('http://127.0.0.1:8545', 'https://rpc.example.com/v2/SECRET'));
  t.equal(https.ok && https.config.chains.devnet!.upstreams[0]!.name, 'rpc.example.com:443', "never the URL's path");

  const off = loadConfigText(`${minimal}metrics: { enabled: false }\nlog: { level: debug, access: true, access_sample: 0.1 }\n`);
  t.ok(off.ok);
  if (off.ok) {
    t.equal(off.config.metrics, undefined, 'enabled: false turns the listener off');
    t.same(off.config.log, { level: 'debug', access: true, access_sample: 0.1 });
  }

  const bad = loadConfigText(`
server: { port: 9000 }
log: { level: loud, access: maybe, access_sample: 2 }
metrics: { port: 9000, token: short, extra: 1 }
chains:
  devnet:
    chain_id: 1
    upstreams:
      - { url: "http://10.0.0.1:8545", name: "node a" }
      - { url: "http://10.0.0.2:8545", name: same }
      - { url: "http://10.0.0.3:8545", name: same }
      - { url: "http://10.0.0.4:8545" }
      - { url: "http://10.0.0.5:8545", name: "10.0.0.4:8545" }
`);
  t.notOk(bad.ok);
  if (bad.ok) return;
  t.same(
    bad.errors.filter((e) => /^(log|metrics)|\.name/.test(e)).sort(),
    [
      'chains.devnet.upstreams[0].name: letters, digits and . _ : - only, 1 to 64 of them (it is a metric label)',
      "chains.devnet.upstreams[2].name: 'same' already names upstreams[1]; give each a name of its own (logs and metrics tell them apart by it)",
      "chains.devnet.upstreams[4].name: '10.0.0.4:8545' already names upstreams[3]; give each a name of its own (logs and metrics tell them apart by it)",
      'log.access: must be true or false',
      'log.access_sample: must be a number from 0 to 1',
      'log.level: must be one of debug, info, warn, error',
      'metrics.extra: unknown key (known: enabled, host, port, token)',
      'metrics.port: 9000 is also server.port on 127.0.0.1; the metrics listener needs a port of its own',
      'metrics.token: at least 16 characters (it guards the exposition)',
    ].sort(),
    'each error names its key',
  );
});

t.test("server.workers: an integer from 1, or 'auto' (the default)", async (t) => {
  const with_ = (workers: unknown) =>
    validateConfig({ server: { workers }, chains: { devnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } } });
  const auto = validateConfig({ chains: { devnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } } });
  t.ok(auto.ok && auto.config.server.workers === 'auto', 'auto when absent');
  for (const good of [1, 2, 64, 'auto']) {
    const r = with_(good);
    t.ok(r.ok && r.config.server.workers === good, `${JSON.stringify(good)} is taken`);
  }
  for (const bad of [0, -1, 1.5, '2', 'all', 1025, true]) {
    const r = with_(bad);
    t.same(
      r.ok ? [] : r.errors,
      [`server.workers: must be an integer from 1 to 1024 or 'auto' (got ${JSON.stringify(bad)})`],
      JSON.stringify(bad),
    );
  }
});

t.test("server.max_connections: an integer from 1, or 'auto' (the default)", async (t) => {
  const chains = { devnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } };
  const auto = validateConfig({ chains });
  t.ok(auto.ok && auto.config.server.max_connections === 'auto', 'auto when absent');
  for (const good of [1, 3, 100_000, 'auto']) {
    const r = validateConfig({ server: { max_connections: good }, chains });
    t.ok(r.ok && r.config.server.max_connections === good, `${JSON.stringify(good)} is taken`);
  }
  for (const bad of [0, -1, 2.5, '300', 10_000_001, false]) {
    const r = validateConfig({ server: { max_connections: bad }, chains });
    t.same(
      r.ok ? [] : r.errors,
      [`server.max_connections: must be an integer from 1 to 10000000 or 'auto' (got ${JSON.stringify(bad)})`],
      JSON.stringify(bad),
    );
  }
});

t.test('server.worker_max_heap_mb and worker_stall_s: 1024 MiB and 5 s by default, each error naming its key', async (t) => {
  const with_ = (server: Record<string, unknown>) =>
    validateConfig({ server, chains: { devnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } } });
  const plain = with_({});
  t.ok(plain.ok && plain.config.server.worker_max_heap_mb === 1024 && plain.config.server.worker_stall_s === 5, 'defaults');
  const set = with_({ worker_max_heap_mb: 64, worker_stall_s: 1 });
  t.ok(set.ok && set.config.server.worker_max_heap_mb === 64 && set.config.server.worker_stall_s === 1, 'the lowest values are taken');
  for (const [key, bad] of [
    ['worker_max_heap_mb', 63],
    ['worker_max_heap_mb', 1.5],
    ['worker_stall_s', 0],
    ['worker_stall_s', 3601],
    ['worker_stall_s', '5'],
  ] as const) {
    const r = with_({ [key]: bad });
    t.match(r.ok ? [] : r.errors, [new RegExp(`^server\\.${key}: `)], `${key}: ${JSON.stringify(bad)}`);
  }
});

t.test('server.worker_relay_max_bytes: 64 MiB by default, from 64 KiB to 1 GiB', async (t) => {
  const with_ = (v: unknown) =>
    validateConfig({
      server: { worker_relay_max_bytes: v },
      chains: { devnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } },
    });
  const plain = with_(undefined);
  t.ok(plain.ok && plain.config.server.worker_relay_max_bytes === 67_108_864, '64 MiB when absent');
  const set = with_(1_048_576);
  t.ok(set.ok && set.config.server.worker_relay_max_bytes === 1_048_576, 'a value in range is taken');
  for (const bad of [65_535, 2 ** 30 + 1, 1.5, '1MB']) {
    const r = with_(bad);
    t.same(r.ok ? [] : r.errors, ['server.worker_relay_max_bytes: must be an integer from 65536 to 1073741824'], JSON.stringify(bad));
  }
});

t.test('split_logs and max_logs_answer_bytes: per chain, off and 64 MiB by default, each error naming its key', async (t) => {
  const plain = loadConfigText(minimal);
  if (t.ok(plain.ok) && plain.ok) {
    t.equal(plain.config.chains.devnet!.split_logs, false);
    t.equal(plain.config.chains.devnet!.max_logs_answer_bytes, 67_108_864);
  }
  const set = loadConfigText(minimal.replace('chain_id: 31337', 'chain_id: 31337\n    split_logs: true\n    max_logs_answer_bytes: 1000'));
  if (t.ok(set.ok) && set.ok) {
    t.equal(set.config.chains.devnet!.split_logs, true);
    t.equal(set.config.chains.devnet!.max_logs_answer_bytes, 1000);
  }
  const bad = loadConfigText(
    minimal.replace('chain_id: 31337', 'chain_id: 31337\n    split_logs: yes-please\n    max_logs_answer_bytes: 0'),
  );
  t.same(bad.ok ? [] : bad.errors, [
    'chains.devnet.split_logs: must be true or false',
    'chains.devnet.max_logs_answer_bytes: must be an integer from 1 to 1073741824',
  ]);
});

t.test('answer_timeout_s: 4 x timeout_s by default, at least timeout_s, each error naming its key', async (t) => {
  const chainWith = (keys: string): string => minimal.replace('chain_id: 31337', `chain_id: 31337\n    ${keys}`);
  const plain = loadConfigText(minimal);
  if (t.ok(plain.ok) && plain.ok) t.equal(plain.config.chains.devnet!.answer_timeout_s, 120);
  const shorter = loadConfigText(chainWith('timeout_s: 5'));
  if (t.ok(shorter.ok) && shorter.ok) t.equal(shorter.config.chains.devnet!.answer_timeout_s, 20, 'follows timeout_s');
  const set = loadConfigText(chainWith('timeout_s: 5\n    answer_timeout_s: 5'));
  if (t.ok(set.ok) && set.ok) t.equal(set.config.chains.devnet!.answer_timeout_s, 5, 'as long as timeout_s is allowed');
  const below = loadConfigText(chainWith('timeout_s: 10\n    answer_timeout_s: 9'));
  t.same(below.ok ? [] : below.errors, [
    'chains.devnet.answer_timeout_s: must be at least timeout_s (10), which an answer may take to start',
  ]);
  const bad = loadConfigText(chainWith('answer_timeout_s: 0'));
  t.match(bad.ok ? [] : bad.errors, ['chains.devnet.answer_timeout_s: must be an integer from 1 to 86400']);
});

t.test('storage.url and cluster: a fleet needs both, never with storage.path, and one thread', async (t) => {
  const chains = { devnet: { chain_id: 1, upstreams: [{ url: 'http://127.0.0.1:1' }] } };
  const errorsOf = (raw: Record<string, unknown>): string[] => {
    const r = validateConfig({ chains, ...raw });
    return r.ok ? [] : r.errors;
  };
  const pg = 'postgres://chaingate@127.0.0.1:5432/chaingate';
  const fleet = validateConfig({ chains, storage: { url: pg }, cluster: { redis_url: 'redis://127.0.0.1:6379/0', instance: 'gw-1' } });
  t.ok(fleet.ok, 'a fleet config');
  if (fleet.ok) {
    t.same(fleet.config.cluster, {
      redis_url: 'redis://127.0.0.1:6379/0',
      instance: 'gw-1',
      reservation_ttl_s: 10,
      reservation_block_ru: 1000,
      redis_failure: 'open',
    });
    t.equal(fleet.config.storage.url, pg);
  }
  t.match(errorsOf({ storage: { path: './x.db', url: pg }, cluster: { redis_url: 'redis://h' } }), [
    /^storage: set path .* or url .*, not both/,
  ]);
  t.match(errorsOf({ storage: { url: pg } }), [/^storage\.url: .*set cluster\.redis_url too/]);
  t.match(errorsOf({ cluster: { redis_url: 'redis://h' } }), [/^cluster: .*set storage\.url too/]);
  t.match(errorsOf({ storage: { url: 'mysql://h/db' }, cluster: { redis_url: 'redis://h' } }), [/^storage\.url/]);
  t.match(errorsOf({ storage: { url: pg }, cluster: { redis_url: 'redis://h', redis_failure: 'maybe' } }), [/^cluster\.redis_failure/]);
  t.match(errorsOf({ storage: { url: pg }, cluster: { redis_url: 'redis://h', reservation_ttl_s: 1 } }), [/^cluster\.reservation_ttl_s/]);
  t.match(errorsOf({ storage: { url: pg }, cluster: { redis_url: 'redis://h', instance: 'a b' } }), [/^cluster\.instance/]);
  t.match(errorsOf({ server: { workers: 2 }, storage: { url: pg }, cluster: { redis_url: 'redis://h' } }), [
    /^server\.workers: an instance of a fleet/,
  ]);
  t.same(
    errorsOf({ server: { workers: 'auto' }, storage: { url: pg }, cluster: { redis_url: 'redis://h' } }),
    [],
    "'auto' is one thread in a fleet",
  );
});
