/**
 * The method policy's keys in the config: every pattern checked against the catalogue the same way wherever
 * it is written, every error naming its key path, and the values read as the runtime gets them.
 */
import t from 'tap';
import { loadConfigText } from '../../src/config/load.js';
import { HEAVY_METHODS } from '../../src/jsonrpc/methods.js';

const chain = (extra: string, upstream = ''): string => `
chains:
  devnet:
    chain_id: 31337
${extra}
    upstreams:
      - { url: "http://127.0.0.1:8545"${upstream} }
`;

function errorsOf(text: string): string[] {
  const r = loadConfigText(text);
  return r.ok ? [] : r.errors;
}

t.test('the policy as written is read as the runtime gets it', async (t) => {
  const r = loadConfigText(`${chain(
    `    methods: { allow: ["eth_*", net_version], deny: [eth_getStorageAt, "debug_*"] }
    ru: { methods: { eth_call: 40 }, default: 25 }
    state_history_blocks: 256`,
    ', archive: true, methods: { deny: ["trace_*", eth_getLogs] }',
  )}
plans:
  free: { rps: 10, methods: { deny: ["debug_*", "trace_*", eth_getLogs] } }
  premium: { rps: 100 }
public: { methods: { deny: [eth_call] } }
`);
  if (!r.ok) return t.fail(r.errors.join('\n'));
  const c = r.config.chains.devnet!;
  t.same(c.methods, { allow: ['eth_*', 'net_version'], deny: ['eth_getStorageAt', 'debug_*'] });
  t.same(c.ru, { methods: { eth_call: 40 }, default: 25 });
  t.equal(c.state_history_blocks, 256);
  t.same(c.upstreams[0]!.methods, { deny: ['trace_*', 'eth_getLogs'] });
  t.equal(c.upstreams[0]!.archive, true);
  t.same(r.config.plans.free!.methods, { deny: ['debug_*', 'trace_*', 'eth_getLogs'] });
  t.same(r.config.plans.premium!.methods, { deny: [] });
  t.same(r.config.public.methods, { deny: ['eth_call'] });
});

t.test('every pattern error names its key path, with what was likely meant', async (t) => {
  const errors = errorsOf(`${chain(
    `    methods: { allow: [eth_getlogs, "eth_*call"], deny: ["Eth_get*"] }
    ru: { methods: { eth_getBalanse: 5, eth_call: -1 }, default: x }
    state_history_blocks: 0`,
    ', archive: yes, methods: { deny: [eth_sendRawTransation], allow: [eth_call] }',
  )}
plans:
  free: { rps: 10, methods: { deny: ["foo_*"], allow: [eth_call] } }
public: { methods: { deny: eth_call } }
`);
  t.same(
    errors.sort(),
    [
      "chains.devnet.methods.allow[0]: 'eth_getlogs' is not a method the gateway serves (did you mean eth_getLogs?)",
      "chains.devnet.methods.allow[1]: 'eth_*call': a pattern is a method name, or a prefix ending in '*' (e.g. debug_*)",
      "chains.devnet.methods.deny[0]: 'Eth_get*' matches no method the gateway serves (did you mean eth_get*?)",
      'chains.devnet.ru.default: must be an integer from 0 to 1000000',
      'chains.devnet.ru.methods.eth_call: must be an integer from 0 to 1000000',
      'chains.devnet.ru.methods.eth_getBalanse: not a method the gateway serves (did you mean eth_getBalance?)',
      'chains.devnet.state_history_blocks: must be an integer from 1 to 100000000',
      "chains.devnet.upstreams[0].archive: must be true, false or 'auto'",
      "chains.devnet.upstreams[0].methods: unknown key 'allow' (known: deny; or the word 'auto')",
      "chains.devnet.upstreams[0].methods.deny[0]: 'eth_sendRawTransation' is not a method the gateway serves (did you mean eth_sendRawTransaction?)",
      'plans.free.methods.allow: unknown key (known: deny)',
      "plans.free.methods.deny[0]: 'foo_*' matches no method the gateway serves (names are case-sensitive; namespaces: eth_*, net_*, web3_*, debug_*, trace_*, txpool_*)",
      "public.methods.deny: must be a list of method names or prefixes ending in '*' (e.g. [eth_getLogs, debug_*])",
    ].sort(),
  );
});

t.test('whole namespaces are accepted before the catalogue serves them; an empty allow list is refused', async (t) => {
  t.same(errorsOf(chain('    methods: { deny: ["debug_*", "trace_*", "txpool_*"] }')), []);
  t.same(errorsOf(chain('    methods: { allow: [] }')), [
    'chains.devnet.methods.allow: an empty list would serve no method; leave allow out to serve every method',
  ]);
});

t.test('the policy belongs to evm chains', async (t) => {
  const errors = errorsOf(`
chains:
  beacon:
    kind: beacon
    methods: { deny: [eth_call] }
    ru: { default: 1 }
    state_history_blocks: 10
    upstreams: [{ url: "http://127.0.0.1:5052", archive: true, methods: { deny: [eth_call] } }]
`);
  t.same(errors.sort(), [
    'chains.beacon.methods: belongs to evm chains; a beacon chain has none',
    'chains.beacon.ru: belongs to evm chains; a beacon chain has none',
    'chains.beacon.state_history_blocks: belongs to evm chains; a beacon chain has none',
    'chains.beacon.upstreams[0].archive: belongs to evm chains',
    'chains.beacon.upstreams[0].methods: belongs to evm chains',
  ]);
});

t.test('the keyless path denies the heavy methods until the operator opens them', async (t) => {
  const base = chain('');
  const heavy = [
    'debug_traceTransaction',
    'debug_traceCall',
    'debug_traceBlockByNumber',
    'debug_traceBlockByHash',
    'trace_transaction',
    'trace_call',
    'trace_block',
    'trace_filter',
    'trace_replayTransaction',
    'trace_replayBlockTransactions',
    'txpool_content',
  ];
  t.same(HEAVY_METHODS, heavy, 'the catalogue marks these heavy');
  const cases: Array<[string, string, string[]]> = [
    ['no public section', '', heavy],
    ['public without methods', 'public: { rps_per_ip: 5 }\n', heavy],
    ['methods without deny', 'public: { methods: {} }\n', heavy],
    ['an empty deny list: every method keyless', 'public: { methods: { deny: [] } }\n', []],
    ['a list of its own replaces the default', 'public: { methods: { deny: [eth_call] } }\n', ['eth_call']],
    [
      'the default and more, written out',
      'public: { methods: { deny: ["debug_*", "trace_*", txpool_content, eth_getLogs] } }\n',
      ['debug_*', 'trace_*', 'txpool_content', 'eth_getLogs'],
    ],
  ];
  for (const [what, text, deny] of cases) {
    const r = loadConfigText(base + text);
    t.ok(r.ok, what);
    if (r.ok) t.same(r.config.public.methods.deny, deny, what);
  }
  const plan = loadConfigText(`${base}plans:\n  free: { rps: 1, max_endpoints: 1 }\n`);
  t.ok(plan.ok);
  if (plan.ok) t.same(plan.config.plans.free!.methods.deny, [], 'a plan denies nothing by default: keys pay for what they call');
});
