/**
 * chains.<slug>.failover as the config reads it: the defaults are the built-in behaviour, a method's policy is
 * the chain's overlaid by its most specific pattern, and impossible combinations are refused naming their key.
 */
import t from 'tap';
import { loadConfigText } from '../../src/config/load.js';
import { builtInPolicy, chainPolicy, overlay, patternFor } from '../../src/config/failover.js';
import { ChainFailover } from '../../src/chain/failover-policies.js';
import { breakerOf } from '../../src/chain/chain-nodes.js';
import { BUILT_IN_BREAKER } from '../../src/upstreams/health.js';

function chainWith(failover: string, extra = ''): string {
  return `
chains:
  devnet:
    chain_id: 31337
    timeout_s: 10
${extra}    failover:
${failover
  .split('\n')
  .map((l) => `      ${l}`)
  .join('\n')}
    upstreams: [{ url: "http://127.0.0.1:8545" }, { url: "http://127.0.0.1:8546" }]
`;
}

function errorsOf(failover: string): string[] {
  const r = loadConfigText(chainWith(failover));
  return r.ok ? [] : r.errors;
}

t.test('no failover key: the built-in policy and breaker, with the chain timeouts', async (t) => {
  const r = loadConfigText(chainWith('{}'));
  t.ok(r.ok);
  if (!r.ok) return;
  const c = r.config.chains.devnet!;
  t.same(chainPolicy(c.failover, c.timeout_s, c.answer_timeout_s), builtInPolicy(10_000, 40_000));
  t.same(breakerOf(c), BUILT_IN_BREAKER);
  const f = new ChainFailover(c.failover, 10_000, 40_000, () => 0);
  t.equal(f.forMethod('eth_call'), f.chain, 'every method shares the chain policy: nothing made per call');
  t.equal(f.chain.answerTimeoutMs, undefined, 'the clients keep the answer deadline already');
});

t.test('a method policy: the chain one overlaid by the most specific pattern, decided once', async (t) => {
  const r = loadConfigText(
    chainWith(`retries: 2
hedge: { after: p90 }
breaker: { failure_streak: 5, open_s: 30, half_open_probes: 2 }
methods:
  "eth_*": { retries: 0 }
  "eth_get*": { timeout_s: 20, retry_on: [transport] }
  eth_getLogs: { timeout_s: 30, answer_timeout_s: 120, hedge: { after: "off" } }`),
  );
  t.ok(r.ok, r.ok ? '' : r.errors.join('\n'));
  if (!r.ok) return;
  const c = r.config.chains.devnet!;
  const f = new ChainFailover(c.failover, 10_000, 40_000, () => 0);
  const logs = f.forMethod('eth_getLogs');
  t.equal(logs, f.forMethod('eth_getLogs'), 'cached');
  t.equal(logs.policy.timeoutMs, 30_000, 'the exact name wins over the prefixes');
  t.equal(logs.policy.answerTimeoutMs, 120_000);
  t.equal(logs.answerTimeoutMs, 120_000, 'sent with its requests');
  t.same(logs.policy.hedge, { kind: 'off' });
  t.equal(logs.policy.retries, 2, 'keys the pattern leaves out are the chain policy');
  t.equal(logs.latency, null, 'no quantile, no latency kept');
  const balance = f.forMethod('eth_getBalance');
  t.equal(balance.policy.timeoutMs, 20_000, 'the longer prefix wins');
  t.equal(balance.policy.retryTransport, true);
  t.equal(balance.policy.retry5xx, false);
  t.same(balance.policy.hedge, { kind: 'quantile', q: 0.9 });
  t.not(balance.latency, null, 'a quantile hedge keeps the latency of its method');
  t.equal(f.forMethod('eth_call').policy.retries, 0);
  t.equal(f.forMethod('net_version').policy.retries, 2, 'no pattern: the chain policy');
  t.same(breakerOf(c), { ...BUILT_IN_BREAKER, failureStreak: 5, openMs: 30_000, halfOpenProbes: 2 });
});

t.test('patternFor: exact over prefix, longer prefix over shorter', async (t) => {
  const patterns = ['*', 'eth_*', 'eth_get*', 'eth_getLogs'];
  t.equal(patternFor(patterns, 'eth_getLogs'), 'eth_getLogs');
  t.equal(patternFor(patterns, 'eth_getCode'), 'eth_get*');
  t.equal(patternFor(patterns, 'eth_call'), 'eth_*');
  t.equal(patternFor(patterns, 'net_version'), '*');
  t.equal(patternFor(['eth_getLogs'], 'eth_call'), undefined);
  t.same(overlay(builtInPolicy(1000, 4000), {}), builtInPolicy(1000, 4000));
});

t.test('impossible combinations are refused with their key path', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['hedge: { after: 10000ms }', /chains\.devnet\.failover\.hedge\.after: 10000 ms is not below the timeout/],
    ['hedge: { after: p10 }', /chains\.devnet\.failover\.hedge\.after: 'p10' is not a quantile/],
    ['hedge: { after: soon }', /chains\.devnet\.failover\.hedge\.after: must be half, off, a latency quantile/],
    ['retry_on: []', /chains\.devnet\.failover\.retry_on: empty while retries is 1/],
    ['retry_on: [timeouts]', /chains\.devnet\.failover\.retry_on\[0\]: 'timeouts' is not an outcome/],
    ['backoff_ms: 9000\njitter_ms: 1000', /chains\.devnet\.failover\.backoff_ms: 9000 ms \(with jitter_ms 1000\) is not below the timeout/],
    ['retries: 6', /chains\.devnet\.failover\.retries/],
    ['hedge: { max: 4 }', /chains\.devnet\.failover\.hedge\.max/],
    ['timeout_s: 50\nanswer_timeout_s: 45', /chains\.devnet\.failover\.answer_timeout_s: 45 is less than timeout_s \(50\)/],
    ['breaker: { half_open_probes: 3 }', /chains\.devnet\.failover\.breaker\.half_open_probes: needs open_s/],
    ['breaker: { failure_rate: 2 }', /chains\.devnet\.failover\.breaker\.failure_rate/],
    ['methods: { eth_getLog: { retries: 0 } }', /chains\.devnet\.failover\.methods\.eth_getLog: 'eth_getLog' is not a method/],
    ['methods: { eth_call: { hedge: { after: 12000ms } } }', /chains\.devnet\.failover\.methods\.eth_call\.hedge\.after: 12000 ms/],
    ['methods: { eth_call: { breaker: {} } }', /chains\.devnet\.failover\.methods\.eth_call/],
    ['retries: 0\nmethods: { eth_call: { retry_on: [] , retries: 1 } }', /methods\.eth_call\.retry_on: empty while retries is 1/],
  ];
  for (const [yaml, expected] of cases) t.match(errorsOf(yaml).join('\n'), expected, yaml);
  t.same(
    errorsOf('methods: { eth_getLogs: { timeout_s: 30, hedge: { after: "off" } } }'),
    [],
    'a method may have a timeout above the chain',
  );
  t.same(errorsOf('retries: 0\nretry_on: []'), [], 'no retry needs no outcome');
  t.same(
    errorsOf('hedge: { after: 10000ms }\nmethods: { eth_call: { retries: 2 } }'),
    ['chains.devnet.failover.hedge.after: 10000 ms is not below the timeout (10000 ms); no hedge could start in time'],
    "the chain's mistake is told once, not again at each method",
  );
});
