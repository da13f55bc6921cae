import t from 'tap';
import { didYouMean, matchesAny, methodMatcher, patternProblem } from '../../src/jsonrpc/method-patterns.js';
import { ALLOWED_METHODS } from '../../src/jsonrpc/methods.js';

t.test('a pattern is an exact name or a prefix ending in *', async (t) => {
  const cases: Array<[string[], string, boolean]> = [
    [['eth_getLogs'], 'eth_getLogs', true],
    [['eth_getLogs'], 'eth_getLogsX', false],
    [['eth_getLogs'], 'eth_getlogs', false],
    [['eth_get*'], 'eth_getLogs', true],
    [['eth_get*'], 'eth_get', true],
    [['eth_get*'], 'eth_call', false],
    [['debug_*', 'trace_*'], 'trace_block', true],
    [['debug_*', 'trace_*'], 'debug_traceCall', true],
    [['debug_*', 'trace_*'], 'txpool_status', false],
    [['*'], 'anything', true],
    [['eth_call', 'net_*'], 'net_version', true],
    [['eth_call', 'net_*'], 'eth_call', true],
    [['eth_call', 'net_*'], 'web3_sha3', false],
    [[], 'eth_call', false],
  ];
  for (const [patterns, method, expected] of cases)
    t.equal(matchesAny(patterns, method), expected, `${JSON.stringify(patterns)} ${expected ? 'matches' : 'does not match'} ${method}`);
});

t.test('a list is compiled once: the same matcher for the same array', async (t) => {
  const list = Object.freeze(['eth_call', 'debug_*']);
  t.equal(methodMatcher(list), methodMatcher(list));
  t.not(methodMatcher(list), methodMatcher(['eth_call', 'debug_*']), 'another array, another matcher');
});

t.test('patterns are checked against the catalogue', async (t) => {
  t.equal(patternProblem('eth_getLogs'), undefined);
  t.equal(patternProblem('eth_get*'), undefined, 'a prefix of served methods');
  t.equal(patternProblem('*'), undefined, 'every method');
  for (const ns of ['eth_*', 'net_*', 'web3_*', 'debug_*', 'trace_*', 'txpool_*'])
    t.equal(patternProblem(ns), undefined, `${ns}: a whole known namespace, served or not`);
  t.equal(patternProblem('eth_getlogs'), "'eth_getlogs' is not a method the gateway serves (did you mean eth_getLogs?)");
  t.equal(patternProblem('eth_getLog'), "'eth_getLog' is not a method the gateway serves (did you mean eth_getLogs?)", 'one edit away');
  t.equal(patternProblem('eth_*call'), "'eth_*call': a pattern is a method name, or a prefix ending in '*' (e.g. debug_*)");
  t.equal(patternProblem('Eth_get*'), "'Eth_get*' matches no method the gateway serves (did you mean eth_get*?)");
  t.equal(patternProblem('Debug_*'), "'Debug_*' matches no method the gateway serves (did you mean debug_*?)");
  t.match(patternProblem('foo_*'), /^'foo_\*' matches no method the gateway serves \(names are case-sensitive; namespaces: eth_\*, net_\*/);
  t.match(patternProblem('eth_getLogz*'), /matches no method the gateway serves/, 'inside a known namespace, a prefix must match');
  for (const m of ALLOWED_METHODS) t.equal(patternProblem(m), undefined, `${m} is a pattern`);
});

t.test('did you mean: another case first, then at most two edits', async (t) => {
  t.equal(didYouMean('ETH_CALL'), 'did you mean eth_call?');
  t.equal(didYouMean('eth_cal'), 'did you mean eth_call?');
  t.equal(didYouMean('eth_getBalanse'), 'did you mean eth_getBalance?');
  t.equal(didYouMean('completely_else'), 'names are case-sensitive, e.g. eth_getLogs');
});
