/**
 * The plans' and the keyless path's limits per method (`method_limits`): read as the runtime gets them,
 * `{}` as none, and every wrong pattern, count or value an error naming its key path.
 */
import t from 'tap';
import { loadConfigText } from '../../src/config/load.js';

const CHAIN = `
chains:
  devnet:
    chain_id: 31337
    upstreams:
      - { url: "http://127.0.0.1:8545" }
`;

function errorsOf(text: string): string[] {
  const r = loadConfigText(CHAIN + text);
  return r.ok ? [] : r.errors;
}

t.test('method_limits as written is read as the runtime gets it; absent and {} are none', async (t) => {
  const r = loadConfigText(`${CHAIN}
plans:
  free: { rps: 100, max_endpoints: 10, method_limits: { eth_getLogs: 10, "debug_*": 1 } }
  open: { rps: 100, max_endpoints: 10, method_limits: {} }
  plain: { rps: 100, max_endpoints: 10 }
public:
  method_limits: { "eth_*": 5 }
`);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  t.same(r.config.plans.free?.method_limits, { eth_getLogs: 10, 'debug_*': 1 });
  t.equal(r.config.plans.open?.method_limits, undefined, '{} reads as none: the request path asks one question');
  t.equal(r.config.plans.plain?.method_limits, undefined);
  t.same(r.config.public.method_limits, { 'eth_*': 5 });
  const defaults = loadConfigText(CHAIN);
  t.equal(defaults.ok && defaults.config.public.method_limits, undefined, 'the keyless path has none by default');
});

t.test('every mistake is an error naming its key path', async (t) => {
  t.same(
    errorsOf(`
plans:
  free: { rps: 100, max_endpoints: 10, method_limits: { eth_getLog: 10, "Debug_*": 1, "eth_*": 0, eth_call: many } }
public:
  method_limits: { "eth_*x": 2 }
`),
    [
      'plans.free.method_limits.eth_*: must be an integer from 1 to 1000000000',
      'plans.free.method_limits.eth_call: must be an integer from 1 to 1000000000',
      "plans.free.method_limits.eth_getLog: 'eth_getLog' is not a method the gateway serves (did you mean eth_getLogs?)",
      "plans.free.method_limits.Debug_*: 'Debug_*' matches no method the gateway serves (did you mean debug_*?)",
      "public.method_limits.eth_*x: 'eth_*x': a pattern is a method name, or a prefix ending in '*' (e.g. debug_*)",
    ],
  );
  const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`eth_${i}*`, 1]));
  t.same(errorsOf(`public:\n  method_limits: ${JSON.stringify(many)}\n`), [
    'public.method_limits: must be a mapping of at most 64 method patterns to requests per second (e.g. { eth_getLogs: 10, "debug_*": 1 })',
  ]);
  t.same(errorsOf('public:\n  method_limits: [eth_getLogs]\n'), [
    'public.method_limits: must be a mapping of at most 64 method patterns to requests per second (e.g. { eth_getLogs: 10, "debug_*": 1 })',
  ]);
});
