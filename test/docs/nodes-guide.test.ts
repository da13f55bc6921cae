/**
 * docs/nodes.md: every config block passes the gateway's config validation as printed, and the config
 * agrees with the command lines above it: each client's HTTP, WebSocket or Beacon address is an upstream's,
 * and a node started without a namespace the gateway serves has that namespace denied (or found out).
 */
import t from 'tap';
import type { Config } from '../../src/config/schema.js';
import { loadConfigText } from '../../src/config/load.js';
import { blockOf, blocksOf } from './doc-blocks.js';

const DOC = 'docs/nodes.md';
const ENV = { SEPOLIA_PROVIDER_TOKEN: 'a-token-for-the-test' };

function load(text: string): Config {
  const r = loadConfigText(text, ENV);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.config;
}

t.test('every config block of the page passes validation', async (t) => {
  const yaml = blocksOf(DOC).filter((b) => b.lang === 'yaml');
  t.ok(yaml.length >= 2, 'the page has its config blocks');
  for (const block of yaml) {
    const r = loadConfigText(block.text, ENV);
    t.ok(r.ok, `the block at line ${block.line} is valid`, { errors: r.ok ? [] : r.errors });
  }
  // The same check refuses a block gone wrong: a namespace the gateway does not serve.
  const broken = loadConfigText(blockOf(DOC, 'yaml', 'geth-1').replace('"trace_*"', '"tracing_*"'), ENV);
  t.notOk(broken.ok, 'a typo in a deny pattern is refused');
});

/** `--flag value`, `--flag=value`, quoted or not, from a command line. */
function flag(cmd: string, name: string): string | undefined {
  const m = new RegExp(`--${name.replace(/\./g, '\\.')}[ =]'?"?([^\\s'"]+)`).exec(cmd);
  return m?.[1];
}

const EXECUTION: Array<{ client: string; name: string; http: [string, string]; ws: [string, string]; api: string }> = [
  { client: 'geth ', name: 'geth-1', http: ['http.addr', 'http.port'], ws: ['ws.addr', 'ws.port'], api: 'http.api' },
  { client: 'reth node', name: 'reth-1', http: ['http.addr', 'http.port'], ws: ['ws.addr', 'ws.port'], api: 'http.api' },
  {
    client: 'nethermind ',
    name: 'nethermind-1',
    http: ['JsonRpc.Host', 'JsonRpc.Port'],
    ws: ['JsonRpc.Host', 'JsonRpc.WebSocketsPort'],
    api: 'JsonRpc.EnabledModules',
  },
  { client: 'erigon ', name: 'erigon-1', http: ['http.addr', 'http.port'], ws: ['http.addr', 'ws.port'], api: 'http.api' },
];

t.test('the config names each execution client where its flags put it, and denies what it lacks', async (t) => {
  const chain = load(blockOf(DOC, 'yaml', 'geth-1')).chains.mainnet!;
  for (const c of EXECUTION) {
    const cmd = blockOf(DOC, 'sh', c.client);
    const up = chain.upstreams.find((u) => u.name === c.name);
    if (up === undefined) throw new Error(`no upstream ${c.name}`);
    t.equal(up.url, `http://${flag(cmd, c.http[0])}:${flag(cmd, c.http[1])}`, `${c.name}: its HTTP address`);
    t.equal(up.ws, `ws://${flag(cmd, c.ws[0])}:${flag(cmd, c.ws[1])}`, `${c.name}: its WebSocket address`);
    const served = (flag(cmd, c.api) ?? '').toLowerCase().split(',');
    t.ok(
      ['eth', 'net', 'web3'].every((n) => served.includes(n)),
      `${c.name}: eth, net and web3 on`,
    );
    for (const ns of ['debug', 'trace', 'txpool']) {
      if (served.includes(ns)) continue;
      const told = up.methods_auto || up.methods.deny.includes(`${ns}_*`);
      t.ok(told, `${c.name} serves no ${ns}: its upstream denies ${ns}_* or finds out`);
    }
  }
  const nethermind = blockOf(DOC, 'sh', 'nethermind ');
  t.match(flag(nethermind, 'JsonRpc.EnabledModules'), /Subscribe/, "Nethermind's subscriptions are its Subscribe module");
});

t.test('the config names each beacon client where its flags put it', async (t) => {
  const config = load(blockOf(DOC, 'yaml', 'lighthouse-1'));
  const beacon = config.chains['mainnet-beacon']!;
  t.equal(beacon.kind, 'beacon');
  t.equal(config.chains.mainnet!.beacon, 'mainnet-beacon', 'the execution chain takes its finality from it');
  const clients: Array<[string, string, string, string]> = [
    ['lighthouse bn', 'lighthouse-1', 'http-address', 'http-port'],
    ['beacon-chain', 'prysm-1', 'http-host', 'http-port'],
    ['teku ', 'teku-1', 'rest-api-interface', 'rest-api-port'],
  ];
  for (const [client, name, host, port] of clients) {
    const cmd = blockOf(DOC, 'sh', client);
    const up = beacon.upstreams.find((u) => u.name === name);
    t.equal(up?.url, `http://${flag(cmd, host)}:${flag(cmd, port)}`, `${name}: its Beacon API address`);
  }
});
