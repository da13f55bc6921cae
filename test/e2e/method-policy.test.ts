/**
 * The operator's method policy end to end, through a real gateway in front of a real anvil with a counting
 * proxy between them, so "never forwarded" is about calls the node was really sent: a plan's deny list
 * (the plan refusal, before parameter validation, free of RU; debug_* to the free plan) against a plan without one, the public path's
 * (its default denies the heavy methods, which `deny: []` opens),
 * the chain's allow and deny lists (-32601), the chain's own RU price, and a reload that changes them.
 */
import t from 'tap';
import type { Config } from '../../src/config/schema.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { countingProxy } from '../support/counting-proxy.js';
import { DEV_ADDRESS, minedReceipt, result as direct } from '../support/dev-chain.js';
import { anvilFor, evmChain, gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, rpc } from '../support/rpc.js';

const BALANCE_RU = 7;
const LOGS = [{ fromBlock: '0x0', toBlock: 'latest' }];
const CALL = [{ to: DEV_ADDRESS, data: '0x' }, 'latest'];

const node = await anvilFor(t, { chainId: 31337 });
const proxy = await countingProxy(t, node.url);
// One thread, so the chain the test looks at is the one serving its calls.
const g = await gatewayFor(t, {
  server: { workers: 1 },
  chains: {
    devnet: evmChain([proxy.url], 31337, {
      methods: { allow: ['eth_*', 'net_version', 'debug_*'], deny: ['eth_getStorageAt'] },
      ru: { methods: { eth_getBalance: BALANCE_RU } },
    }),
  },
  plans: { free: { rps: 100_000, methods: { deny: ['eth_getLogs', 'debug_*'] } }, premium: { rps: 100_000 } },
  public: { rps_per_ip: 10_000_000, max_batch: 1000, methods: { deny: ['eth_call'] } },
});

function endpoint(gw: TestGateway, plan: string): { ownerId: number; url: string } {
  const owner = createOwnerAdmin(gw.gateway.context.tenancy.store!).createOwner(`${plan}-${Math.random()}`, plan, 1_000_000);
  const made = gw.gateway.context.tenancy.directory!.createEndpoint(owner.id, 'devnet', plan, 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  return { ownerId: owner.id, url: `${gw.base}/v1/rpc/${made.apiKey}` };
}

const free = endpoint(g, 'free');
const premium = endpoint(g, 'premium');
const publicUrl = `${g.base}/v1/rpc/public`;
const available = (ownerId: number): number => g.gateway.context.tenancy.ledger.available(ownerId);
const errorText = (code: number, message: string, id = 1): string =>
  `{"jsonrpc":"2.0","id":${id},"error":{"code":${code},"message":${JSON.stringify(message)}}}`;
const resultText = (value: unknown, id = 1): string => `{"jsonrpc":"2.0","id":${id},"result":${JSON.stringify(value)}}`;

t.test("a plan's deny list: refused by name of the plan, before its params are read, free of RU", async (t) => {
  const before = available(free.ownerId);
  const refusal = errorText(-32004, "eth_getLogs is not available on plan 'free'");
  const refused = await rpc(free.url, 'eth_getLogs', LOGS);
  t.equal(refused.status, 200);
  t.equal(refused.text, refusal);
  const malformed = await rpc(free.url, 'eth_getLogs', [{ fromBlock: 'yesterday' }]);
  t.equal(malformed.text, refusal, 'the plan decides before parameter validation');
  const batch = await post(
    free.url,
    JSON.stringify([
      { jsonrpc: '2.0', id: 1, method: 'eth_getLogs', params: LOGS },
      { jsonrpc: '2.0', id: 2, method: 'eth_chainId', params: [] },
    ]),
  );
  t.equal(batch.status, 200, 'a batch with a refused item is answered 200, item by item');
  t.equal(batch.text, `[${refusal},${resultText('0x7a69', 2)}]`);
  t.equal(proxy.count('eth_getLogs'), 0, 'the node never saw it');
  t.equal(available(free.ownerId), before - 5, "only eth_chainId's 5 RU were charged");

  const answer = await rpc(premium.url, 'eth_getLogs', LOGS);
  t.equal(answer.text, resultText(await direct(node.url, 'eth_getLogs', LOGS)), 'a premium key gets the logs');
  t.equal(proxy.count('eth_getLogs'), 1);
});

t.test('debug_* denied to the free plan: the refusal for free, the trace for premium', async (t) => {
  const hash = await direct<string>(node.url, 'eth_sendTransaction', [{ from: DEV_ADDRESS, to: DEV_ADDRESS, value: '0x1' }]);
  await minedReceipt(node.url, hash);
  const refused = await rpc(free.url, 'debug_traceTransaction', [hash]);
  t.equal(refused.text, errorText(-32004, "debug_traceTransaction is not available on plan 'free'"));
  t.equal(proxy.count('debug_traceTransaction'), 0);
  const traced = await rpc(premium.url, 'debug_traceTransaction', [hash]);
  t.equal(traced.text, resultText(await direct(node.url, 'debug_traceTransaction', [hash])), 'the trace anvil gives');
});

t.test("the public path's deny list, keys unaffected", async (t) => {
  const refused = await rpc(publicUrl, 'eth_call', CALL);
  t.equal(refused.status, 200);
  t.equal(
    refused.text,
    errorText(-32004, 'eth_call is not available on the public path (public.methods); call it with an API key whose plan includes it'),
  );
  t.equal(proxy.count('eth_call'), 0);
  t.equal((await rpc(premium.url, 'eth_call', CALL)).text, resultText(await direct(node.url, 'eth_call', CALL)));
  t.equal(proxy.count('eth_call'), 1);
  t.equal((await rpc(publicUrl, 'eth_chainId')).text, resultText('0x7a69'), 'the rest of the public path is served');
});

t.test('the keyless path by default: the heavy methods refused, free, never forwarded; a key or deny: [] serves them', async (t) => {
  const hash = await direct<string>(node.url, 'eth_sendTransaction', [{ from: DEV_ADDRESS, to: DEV_ADDRESS, value: '0x2' }]);
  const mined = await minedReceipt(node.url, hash);
  // No public.methods in the config: the default applies (the public rate is lifted for the test, as gatewayFor does).
  const byDefault = await gatewayFor(t, {
    server: { workers: 1 },
    chains: { devnet: evmChain([proxy.url]) },
    public: { rps_per_ip: 10_000_000, max_batch: 1000 },
  });
  const keyless = `${byDefault.base}/v1/rpc/public`;
  const heavy: Array<[string, unknown[]]> = [
    ['debug_traceTransaction', [hash]],
    ['debug_traceBlockByNumber', [mined.blockNumber]],
    ['debug_traceCall', [{ to: DEV_ADDRESS, data: '0x' }, 'latest']],
    ['trace_block', [mined.blockNumber]],
    ['trace_filter', [{ fromBlock: mined.blockNumber, toBlock: mined.blockNumber }]],
    ['txpool_content', []],
  ];
  for (const [method, params] of heavy) {
    const before = proxy.count(method);
    t.equal(
      (await rpc(keyless, method, params)).text,
      errorText(-32004, `${method} is not available on the public path (public.methods); call it with an API key whose plan includes it`),
      `${method}: refused on the keyless path`,
    );
    t.equal(proxy.count(method), before, `${method}: never forwarded`);
  }
  t.equal((await rpc(keyless, 'txpool_status')).text, resultText(await direct(node.url, 'txpool_status')), 'a light txpool view is served');
  t.equal((await rpc(keyless, 'eth_chainId')).text, resultText('0x7a69'), 'and the rest of the path');
  const owner = createOwnerAdmin(byDefault.gateway.context.tenancy.store!).createOwner('heavy', 'growth', 1_000_000);
  const made = byDefault.gateway.context.tenancy.directory!.createEndpoint(owner.id, 'devnet', 'k', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  const keyed = await rpc(`${byDefault.base}/v1/rpc/${made.apiKey}`, 'debug_traceTransaction', [hash]);
  t.equal(keyed.text, resultText(await direct(node.url, 'debug_traceTransaction', [hash])), 'a key whose plan allows it gets the trace');

  const opened = await gatewayFor(t, {
    server: { workers: 1 },
    chains: { devnet: evmChain([proxy.url]) },
    public: { rps_per_ip: 10_000_000, max_batch: 1000, methods: { deny: [] } },
  });
  const trace = await rpc(`${opened.base}/v1/rpc/public`, 'debug_traceTransaction', [hash]);
  t.equal(trace.text, resultText(await direct(node.url, 'debug_traceTransaction', [hash])), 'public.methods.deny: [] serves it keyless');
});

t.test("the chain's allow and deny lists: -32601 naming the method, never forwarded, free of RU", async (t) => {
  const before = available(premium.ownerId);
  const denied = await rpc(premium.url, 'eth_getStorageAt', [DEV_ADDRESS, '0x0', 'latest']);
  t.equal(denied.status, 200);
  t.equal(denied.text, errorText(-32601, "Method not found: eth_getStorageAt is not served on chain 'devnet'"), 'deny wins over allow');
  const outside = await rpc(premium.url, 'web3_clientVersion');
  t.equal(outside.text, errorText(-32601, "Method not found: web3_clientVersion is not served on chain 'devnet'"), 'outside allow');
  t.equal((await rpc(publicUrl, 'web3_clientVersion')).text, outside.text, 'the same on the public path');
  t.equal(proxy.count('eth_getStorageAt') + proxy.count('web3_clientVersion'), 0, 'the node never saw them');
  t.equal(available(premium.ownerId), before, 'refusals cost nothing');
  t.equal((await rpc(premium.url, 'net_version')).text, resultText(await direct(node.url, 'net_version')), 'allowed by name');
  t.match(
    (await rpc(premium.url, 'eth_bogus')).json,
    { error: { code: -32601, message: /eth_bogus is not served by this gateway/ } },
    'a name outside the catalogue gets the catalogue answer, whatever the patterns',
  );
});

t.test("the chain's own RU price", async (t) => {
  const before = available(premium.ownerId);
  const answer = await rpc(premium.url, 'eth_getBalance', [DEV_ADDRESS, 'latest']);
  t.equal(answer.text, resultText(await direct(node.url, 'eth_getBalance', [DEV_ADDRESS, 'latest'])));
  t.equal(available(premium.ownerId), before - BALANCE_RU, `eth_getBalance costs ${BALANCE_RU} RU on this chain`);
});

t.test('a reload applies a changed policy', async (t) => {
  const next = structuredClone(g.gateway.context.config) as Config;
  next.plans.free!.methods.deny = ['eth_getBalance'];
  next.chains.devnet!.methods = { allow: undefined, deny: ['eth_getLogs'] };
  next.public.methods.deny = [];
  await g.gateway.reload(next);
  t.equal(
    (await rpc(free.url, 'eth_getBalance', [DEV_ADDRESS, 'latest'])).text,
    errorText(-32004, "eth_getBalance is not available on plan 'free'"),
  );
  t.equal(
    (await rpc(free.url, 'eth_getLogs', LOGS)).text,
    errorText(-32601, "Method not found: eth_getLogs is not served on chain 'devnet'"),
    "the chain's refusal comes before the plan's",
  );
  const storage = [DEV_ADDRESS, '0x0', 'latest'];
  t.equal((await rpc(free.url, 'eth_getStorageAt', storage)).text, resultText(await direct(node.url, 'eth_getStorageAt', storage)));
  t.equal((await rpc(publicUrl, 'web3_clientVersion')).text, resultText(await direct(node.url, 'web3_clientVersion')));
  t.equal((await rpc(publicUrl, 'eth_call', CALL)).text, resultText(await direct(node.url, 'eth_call', CALL)));
});
