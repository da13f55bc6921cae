import t from 'tap';
import type { ChainConfig } from '../../src/config/schema.js';
import { resolveRoute, RouteMemo, type RouteTable } from '../../src/server/routes.js';

// Only the fields routing reads; the rest of a chain's config plays no part here.
const chain = (slug: string, kind: 'evm' | 'beacon' = 'evm'): ChainConfig =>
  ({ slug, name: slug, kind, chain_id: kind === 'evm' ? 1 : undefined, timeout_s: 30, upstreams: [] }) as unknown as ChainConfig;
const table: RouteTable = {
  chains: { mainnet: chain('mainnet'), sepolia: chain('sepolia'), 'mainnet-beacon': chain('mainnet-beacon', 'beacon') },
  defaultChain: 'mainnet',
};

const cases: Array<[string, string, string, string]> = [
  // method, url, host → expected summary
  ['post', '/v1/rpc/public', '', 'rpc mainnet public'],
  ['post', '/v1/rpc/public', 'sepolia.rpc.example.com', 'rpc sepolia public'],
  ['post', '/v1/rpc/public', 'SEPOLIA.rpc.example.com:443', 'rpc sepolia public'],
  ['post', '/v1/rpc/public', 'sepolia:8080', 'rpc sepolia public'],
  ['post', '/v1/rpc/public', '127.0.0.1:8080', 'rpc mainnet public'],
  ['post', '/sepolia/v1/rpc/public', '127.0.0.1:8080', 'rpc sepolia public'],
  ['post', '/sepolia/v1/rpc/KEY123', '', 'rpc sepolia key=KEY123'],
  ['post', '/v1/rpc/KEY123', 'mainnet.rpc.example.com', 'rpc mainnet key=KEY123'],
  ['post', '/mainnet/v1/rpc/public', 'sepolia.rpc.example.com', 'error not_found'],
  ['post', '/unknown/v1/rpc/public', '', 'error not_found'],
  // No key at all is the empty key: the handler refuses it exactly as an unknown key (401).
  ['post', '/v1/rpc/', '', 'rpc mainnet key='],
  ['post', '/v1/rpc', '', 'rpc mainnet key='],
  ['post', '/sepolia/v1/rpc', '', 'rpc sepolia key='],
  ['post', '/sepolia/v1/rpc/', '', 'rpc sepolia key='],
  ['get', '/v1/rpc//eth/v1/node/version', '', 'rpc mainnet key= rest=/eth/v1/node/version'],
  // A Beacon path whose key is in a header: no key segment at all.
  ['get', '/v1/rpc/eth/v1/node/version', '', 'rpc mainnet key= rest=/eth/v1/node/version'],
  ['get', '/mainnet-beacon/v1/rpc/eth/v1/events', '', 'rpc mainnet-beacon key= rest=/eth/v1/events'],
  ['upgrade', '/v1/rpc', '', 'rpc mainnet key='],
  ['post', '/v1/rpcx', '', 'error not_found'],
  ['post', '/', '', 'error not_found'],
  ['post', '/v1/rpc/public/eth/v1/node/version', '', 'error not_found'],
  ['get', '/v1/rpc/public', '', 'error method_not_allowed'],
  ['put', '/v1/rpc/public', '', 'error method_not_allowed'],
  ['options', '/v1/rpc/public', '', 'preflight'],
  ['get', '/mainnet-beacon/v1/rpc/public/eth/v1/node/version', '', 'rpc mainnet-beacon public rest=/eth/v1/node/version'],
  // A key on an unnamed path: its endpoint's network (known after the lookup) decides what is served.
  ['get', '/v1/rpc/KEY123/eth/v1/node/version', '', 'rpc mainnet key=KEY123 rest=/eth/v1/node/version'],
  ['get', '/mainnet/v1/rpc/KEY123/eth/v1/node/version', '', 'error not_found'],
  ['upgrade', '/v1/rpc/public', '', 'rpc mainnet public'],
  ['upgrade', '/mainnet-beacon/v1/rpc/public', '', 'error not_found'],
];

for (const [method, url, host, expected] of cases) {
  t.test(`${method} ${url} host=${host || '-'}`, async (t) => {
    const r = resolveRoute(method, url, host, table);
    const summary =
      r.kind === 'rpc'
        ? `rpc ${r.chain.slug} ${r.key === null ? 'public' : `key=${r.key}`}${r.rest ? ` rest=${r.rest}` : ''}`
        : r.kind === 'error'
          ? `error ${r.code}`
          : r.kind;
    t.equal(summary, expected);
  });
}

t.test('RouteMemo answers as resolveRoute does, twice over, and follows a reload of the table', async (t) => {
  const memo = new RouteMemo();
  const live: RouteTable = { chains: { ...table.chains }, defaultChain: table.defaultChain };
  for (let round = 0; round < 2; round++) {
    for (const [method, url, host] of cases)
      t.same(memo.resolve(method, url, host, live), resolveRoute(method, url, host, live), `${method} ${url} ${host}`);
  }
  t.equal(memo.resolve('post', '/v1/rpc/public', '', live), memo.resolve('post', '/v1/rpc/public', '', live), 'a POST route is kept');
  // A reload replaces the table's chains and default chain in place (gateway-stop.ts).
  live.chains = { sepolia: chain('sepolia') };
  t.match(memo.resolve('post', '/v1/rpc/public', '', live), { kind: 'error', code: 'not_found' }, 'the old default chain is gone');
  live.defaultChain = 'sepolia';
  t.match(memo.resolve('post', '/v1/rpc/public', '', live), { kind: 'rpc', chain: { slug: 'sepolia' } }, 'a new default chain');
  const wrong: string[] = [];
  for (let i = 0; i < 3000; i++) {
    const r = memo.resolve('post', `/v1/rpc/KEY${i}`, '', live);
    if (r.kind !== 'rpc' || r.key !== `KEY${i}`) wrong.push(`KEY${i}`);
  }
  t.same(wrong, [], 'past the most it keeps, every key still gets its own route');
});
