/**
 * Beacon REST through the gateway. Against the devnet's beacon node following a real anvil: every route
 * of the allowlist answers through the gateway, public and keyed, exactly as the node answers it
 * (status, bytes, Content-Type, Eth-Consensus-Version, SSZ), and keyed callers pay the path's price.
 * Against a counting fake node: refusals (traversal, bad ids, unlisted paths, wrong verbs, keys, RU,
 * rate) never reach it and query strings do; a 200 MB debug state streams through the built daemon
 * with bounded RSS; a node that is down or hangs gives 502.
 */
import t, { type Test } from 'tap';
import { request as httpRequest } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BEACON_ROUTES, EVENTS_TEMPLATE } from '../../src/beacon/paths.js';
import type { BeaconNode } from '../../src/devnet/beacon/beacon-node.js';
import type { AnvilNode } from '../../src/devnet/anvil.js';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { startDaemon } from '../support/daemon.js';
import { type FakeBeacon, fakeBeacon, type SeenRequest, streamBody } from '../support/fake-beacon.js';
import { waitFor } from '../support/wait-for.js';
import { closedPort, fakeUpstream } from '../support/fake-upstream.js';
import { devnetBeacon } from '../support/devnet-beacon.js';
import { gatewayFor, type TestGateway } from '../support/gateway.js';
import { post, rpc } from '../support/rpc.js';

/** Response headers the gateway passes through from the node. */
const PASSED_HEADERS = [
  'content-type',
  'eth-consensus-version',
  'eth-execution-payload-blinded',
  'eth-execution-payload-value',
  'eth-consensus-block-value',
  'eth-execution-payload-included',
] as const;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/**
 * One request with the path sent byte for byte as given (no URL normalisation, unlike fetch), the body
 * read whole. `agent: false`: a fresh connection each time, since refusals close theirs.
 */
function call(
  url: string,
  opts: { method?: string; path?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      headers['content-length'] = String(Buffer.byteLength(opts.body));
    }
    const req = httpRequest(
      {
        host: u.hostname,
        port: u.port,
        method: opts.method ?? 'GET',
        path: opts.path ?? `${u.pathname}${u.search}`,
        headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

function json(a: Answer): unknown {
  try {
    return JSON.parse(a.body.toString());
  } catch {
    return undefined;
  }
}

/** A refusal in the Beacon error shape, exactly: two fields, `code` equal to the HTTP status. */
function assertBeaconError(t: Test, a: Answer, status: number, message: RegExp | string, what: string): void {
  t.equal(a.status, status, `${what}: status ${status}`);
  t.match(a.headers['content-type'], /^application\/json/, `${what}: JSON`);
  const body = json(a) as { code?: unknown; message?: unknown } | undefined;
  t.same(Object.keys(body ?? {}).sort(), ['code', 'message'], `${what}: {code, message} only (${a.body.toString().slice(0, 200)})`);
  t.equal(body?.code, status, `${what}: code equals the HTTP status`);
  if (typeof message === 'string') t.equal(body?.message, message, `${what}: message`);
  else t.match(body?.message, message, `${what}: message`);
}

function endpointFor(g: TestGateway, network: string, ru: number, plan = 'growth'): { ownerId: number; key: string } {
  const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner(`o${Math.random()}`, plan, ru);
  const made = g.gateway.context.tenancy.directory!.createEndpoint(owner.id, network, 'beacon', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  return { ownerId: owner.id, key: made.apiKey };
}

async function nodeJson<T>(node: BeaconNode, path: string): Promise<T> {
  const res = await fetch(node.url + path);
  return ((await res.json()) as { data: T }).data;
}

async function anvilCall(anvil: AnvilNode, method: string, params: unknown[] = []): Promise<unknown> {
  return (await rpc(anvil.url, method, params)).json;
}

/** Requests the gateway makes of a node on its own (start-up probe, head polls, genesis checks); every other one came from a client. */
const BACKGROUND: ReadonlySet<string> = new Set([
  'GET /eth/v1/node/version',
  'GET /eth/v1/beacon/headers/head',
  'GET /eth/v1/beacon/genesis',
]);
const forwarded = (node: FakeBeacon): SeenRequest[] => node.requests.filter((r) => !BACKGROUND.has(`${r.method} ${r.target}`));

const RANDAO_REVEAL = '0x' + 'ab'.repeat(96);
const DATA_ROOT = '0x' + '11'.repeat(32);

t.test('every listed path answers through the gateway, public and keyed, exactly as the node answers it', async (t) => {
  const { anvil, node, g } = await devnetBeacon(t);
  await anvilCall(anvil, 'anvil_mine', ['0x64']);
  await waitFor(() => node.headSlot() === 100, { what: 'the beacon node at slot 100', ms: 10_000 });
  const head = 100;
  const blockRoot = (await nodeJson<{ root: string }>(node, '/eth/v1/beacon/blocks/head/root')).root;
  const stateRoot = (await nodeJson<{ root: string }>(node, '/eth/v1/beacon/states/head/root')).root;
  const pubkey = (await nodeJson<{ validator: { pubkey: string } }>(node, '/eth/v1/beacon/states/head/validators/3')).validator.pubkey;

  const ids: Record<string, string> = {
    '{state_id}': 'head',
    '{block_id}': 'head',
    '{validator_id}': '0',
    '{epoch}': '3',
    '{slot}': String(head + 1),
  };
  const queries: Record<string, string> = {
    '/eth/v1/validator/attestation_data': `?slot=${head}&committee_index=0`,
    '/eth/v1/validator/aggregate_attestation': `?attestation_data_root=${DATA_ROOT}&slot=${head}`,
    '/eth/v2/validator/aggregate_attestation': `?attestation_data_root=${DATA_ROOT}&slot=${head}&committee_index=0`,
    '/eth/v1/validator/sync_committee_contribution': `?slot=${head}&subcommittee_index=1&beacon_block_root=${blockRoot}`,
    '/eth/v3/validator/blocks/{slot}': `?randao_reveal=${RANDAO_REVEAL}`,
    // The GET form of attester duties (the POST form takes the same indices as its body).
    '/eth/v1/validator/duties/attester/{epoch}': '?index=0,1,2,3,4,5,6,7',
  };
  const indices = JSON.stringify(Array.from({ length: 8 }, (_, i) => String(i)));
  const poolItem = JSON.stringify({ data: { slot: String(head) }, signature: '0x' + 'cd'.repeat(96) });
  const bodies: Record<string, string> = {
    '/eth/v1/beacon/states/{state_id}/validators': JSON.stringify({ ids: ['1', pubkey] }),
    '/eth/v1/beacon/states/{state_id}/validator_balances': JSON.stringify(['1', '2']),
    '/eth/v1/validator/duties/attester/{epoch}': indices,
    '/eth/v1/validator/duties/sync/{epoch}': indices,
  };
  const listPools = /\/pool\/(attestations|sync_committees|bls_to_execution_changes)$/;

  type Case = { method: 'GET' | 'POST'; path: string; body?: string; accept?: string };
  const cases: Case[] = [];
  const covered = new Set<string>();
  for (const { method, template } of BEACON_ROUTES) {
    if (template === EVENTS_TEMPLATE) continue; // a stream, not an answer: beacon-events.test.ts
    const path = template.replace(/\{[a-z_]+\}/g, (p) => ids[p]!) + (method === 'GET' ? (queries[template] ?? '') : '');
    const body = method === 'GET' ? undefined : (bodies[template] ?? (listPools.test(template) ? `[${poolItem}]` : poolItem));
    cases.push({ method, path, ...(body !== undefined ? { body } : {}) });
    covered.add(`${method} ${template}`);
  }
  // Each form of each path parameter once, beyond the `head` / index / decimal forms above.
  for (const id of ['genesis', 'finalized', 'justified', '64', stateRoot])
    cases.push({ method: 'GET', path: `/eth/v1/beacon/states/${id}/finality_checkpoints` });
  for (const id of ['genesis', 'finalized', '64', blockRoot]) cases.push({ method: 'GET', path: `/eth/v1/beacon/headers/${id}` });
  cases.push({ method: 'GET', path: `/eth/v1/beacon/states/head/validators/${pubkey}` });
  // A slot the node has not reached: the node's own 404 passes through untouched.
  cases.push({ method: 'GET', path: '/eth/v1/beacon/headers/999999' });
  // Attester duties by GET without the indices the node needs: the node's own 400 passes through untouched.
  cases.push({ method: 'GET', path: '/eth/v1/validator/duties/attester/3' });
  // SSZ for the paths that serve it.
  cases.push({ method: 'GET', path: '/eth/v2/beacon/blocks/head', accept: 'application/octet-stream' });
  cases.push({ method: 'GET', path: '/eth/v2/debug/beacon/states/head', accept: 'application/octet-stream' });
  t.equal(covered.size, BEACON_ROUTES.length - 1, 'a case for every route of the allowlist but the event stream');

  const keyed = endpointFor(g, 'devnet-beacon', 10_000_000);
  const via = {
    public: `${g.base}/devnet-beacon/v1/rpc/public`,
    keyed: `${g.base}/devnet-beacon/v1/rpc/${keyed.key}`,
  };
  const statuses: Record<number, number> = {};
  let ssz = 0;
  for (const c of cases) {
    const opts = {
      method: c.method,
      ...(c.body !== undefined ? { body: c.body } : {}),
      ...(c.accept ? { headers: { accept: c.accept } } : {}),
    };
    const direct = await call(node.url + c.path, opts);
    statuses[direct.status] = (statuses[direct.status] ?? 0) + 1;
    for (const [name, base] of Object.entries(via)) {
      const gw = await call(base + c.path, opts);
      const what = `${c.method} ${c.path.slice(0, 90)}${c.accept ? ' (SSZ)' : ''} ${name}`;
      if (gw.status !== direct.status || !gw.body.equals(direct.body)) {
        t.fail(`${what}: gateway ${gw.status} ${gw.body.length} bytes, node ${direct.status} ${direct.body.length} bytes`, {
          gateway: gw.body.toString().slice(0, 300),
        });
        continue;
      }
      const differing = PASSED_HEADERS.filter((h) => gw.headers[h] !== direct.headers[h]);
      if (differing.length > 0)
        t.fail(`${what}: headers differ: ${differing.map((h) => `${h} ${gw.headers[h]} vs ${direct.headers[h]}`).join(', ')}`);
      else t.pass(`${what}: ${gw.status}, ${gw.body.length} bytes, ${gw.headers['content-type'] ?? 'no content-type'}`);
    }
    if (c.accept) {
      t.equal(direct.headers['content-type'], 'application/octet-stream', `${c.path}: the node answered SSZ`);
      t.equal(direct.headers['eth-consensus-version'], 'electra', `${c.path}: SSZ names its fork`);
      ssz++;
    }
  }
  t.equal(ssz, 2);
  // Every listed path answered 200 by the node (and so through the gateway), but the unreached slot and the duties without indices.
  t.same(statuses, { 200: cases.length - 2, 404: 1, 400: 1 }, 'the node answered every case but two with 200');

  const health = await call(`${via.public}/eth/v1/node/health`);
  t.same([health.status, health.body.length], [200, 0], 'node/health: 200 with an empty body');
  const keyedHealth = await call(`${via.keyed}/eth/v1/node/health`);
  t.same([keyedHealth.status, keyedHealth.body.length], [200, 0], 'node/health keyed: 200 with an empty body');
});

t.test('chain kinds: a Beacon path on an evm chain and JSON-RPC to a beacon chain are 404', async (t) => {
  const { g } = await devnetBeacon(t);
  const onEvm = await call(`${g.base}/devnet/v1/rpc/public/eth/v1/node/version`);
  t.equal(onEvm.status, 404);
  t.match(onEvm.body.toString(), /chain 'devnet' is an evm chain/, 'the 404 names the chain as an evm chain');
  const onDefault = await call(`${g.base}/v1/rpc/public/eth/v1/node/version`);
  t.equal(onDefault.status, 404, 'the default chain is the evm one: a Beacon path there is 404 too');
  t.match(onDefault.body.toString(), /evm chain/);

  const jsonRpc = await post(
    `${g.base}/devnet-beacon/v1/rpc/public`,
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }),
  );
  t.equal(jsonRpc.status, 404, 'JSON-RPC POST to a beacon chain root');
  t.same(Object.keys(jsonRpc.json as object).sort(), ['code', 'message']);
  t.match(jsonRpc.json, { code: 404, message: /'devnet-beacon' is a beacon chain/ });
  const keyed = endpointFor(g, 'devnet-beacon', 1000);
  const keyedRpc = await post(
    `${g.base}/devnet-beacon/v1/rpc/${keyed.key}`,
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }),
  );
  t.equal(keyedRpc.status, 404, 'keyed JSON-RPC POST to a beacon chain root');
  t.match(keyedRpc.json, { code: 404 });
  // The evm chain itself still serves JSON-RPC beside it.
  t.match((await rpc(`${g.base}/devnet/v1/rpc/public`, 'eth_chainId')).json, { result: '0x7a69' });

  // docs/api.md, Which chain a request reaches: with neither Host nor path naming a chain, the endpoint's network decides it.
  const named = await call(`${g.base}/devnet-beacon/v1/rpc/${keyed.key}/eth/v1/node/version`);
  t.equal(named.status, 200, 'a beacon key with the chain named in the path');
  const unnamed = await call(`${g.base}/v1/rpc/${keyed.key}/eth/v1/node/version`);
  t.equal(unnamed.status, 200, "a beacon key without a chain named: its endpoint's network serves it");
});

t.test('refusals answer in the Beacon shape and never reach the node; query strings do', async (t) => {
  const node = await fakeBeacon(t);
  const g = await gatewayFor(t, { chains: { 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: node.url }] } } });
  const keyed = endpointFor(g, 'devnet-beacon', 1_000_000);
  const prefixes = { public: '/v1/rpc/public', keyed: `/v1/rpc/${keyed.key}` };
  const root31 = '0x' + 'ab'.repeat(31);
  const root32 = '0x' + 'ab'.repeat(32);
  type Refusal = [method: string, path: string, status: number, message: RegExp, allow?: string];
  const refusals: Refusal[] = [
    // Traversal and encodings no Beacon path needs.
    ['GET', '/eth/v1/beacon/states/head/%2e%2e/%2e%2e/%2e%2e/admin', 400, /percent-encoding/],
    ['GET', '/eth/v1/beacon/states/%2E%2E/root', 400, /percent-encoding/],
    ['GET', '/eth/v1/beacon/headers/head%2F..%2F..', 400, /percent-encoding/],
    ['GET', '/eth/v1/node/../../../admin', 400, /'\.\.' path segment/],
    ['GET', '/eth/v1/beacon/states/head/../../../../etc/passwd', 400, /'\.\.' path segment/],
    ['GET', '/eth/v1/node/./version', 400, /'\.' path segment/],
    ['GET', '/eth/v1//node/version', 400, /empty path segment/],
    ['GET', '/eth/v1/node/version/', 400, /empty path segment/],
    ['GET', '//eth/v1/node/version', 400, /empty path segment/],
    ['GET', '/eth/v1/beacon/states/head\\..\\root', 400, /characters outside/],
    // Bad ids.
    ['GET', '/eth/v1/beacon/states/latest/root', 400, /Invalid state_id 'latest'/],
    ['GET', '/eth/v1/beacon/states/-1/root', 400, /Invalid state_id '-1'/],
    ['GET', '/eth/v1/beacon/states/0012/fork', 400, /Invalid state_id '0012'/],
    ['GET', '/eth/v1/beacon/states/18446744073709551616/fork', 400, /Invalid state_id/],
    ['GET', `/eth/v1/beacon/states/${root31}/root`, 400, /Invalid state_id/],
    ['GET', '/eth/v1/beacon/headers/justified', 400, /Invalid block_id 'justified'/],
    ['GET', `/eth/v2/beacon/blocks/0x${'zz'.repeat(32)}`, 400, /Invalid block_id/],
    ['GET', '/eth/v1/beacon/blocks/1e3/root', 400, /Invalid block_id '1e3'/],
    ['GET', '/eth/v1/beacon/states/head/validators/abc', 400, /Invalid validator_id 'abc'/],
    ['GET', `/eth/v1/beacon/states/head/validators/${root32}`, 400, /Invalid validator_id/],
    ['GET', '/eth/v1/validator/duties/proposer/ten', 400, /Invalid epoch 'ten'/],
    ['POST', '/eth/v1/validator/duties/attester/-3', 400, /Invalid epoch '-3'/],
    ['GET', '/eth/v3/validator/blocks/1.5', 400, /Invalid slot '1\.5'/],
    // Unlisted paths.
    ['GET', '/eth/v1/node/secrets', 404, /No Beacon API path/],
    ['GET', '/eth/v1/admin/shutdown', 404, /No Beacon API path/],
    ['GET', '/eth/v9/node/version', 404, /No Beacon API path/],
    ['GET', '/eth', 404, /No Beacon API path/],
    ['GET', '/eth/v1/beacon/states/head', 404, /No Beacon API path/],
    // Wrong verbs.
    ['POST', '/eth/v1/node/version', 405, /POST is not allowed on \/eth\/v1\/node\/version; use GET/, 'GET'],
    ['PUT', '/eth/v1/node/version', 405, /PUT is not allowed/, 'GET'],
    ['DELETE', '/eth/v1/beacon/pool/attestations', 405, /DELETE is not allowed/, 'GET, POST'],
    ['PATCH', '/eth/v1/beacon/states/head/validators', 405, /PATCH is not allowed/, 'GET, POST'],
    ['PUT', '/eth/v1/validator/duties/attester/1', 405, /PUT is not allowed .*use GET, POST/, 'GET, POST'],
    ['GET', '/eth/v1/validator/duties/sync/1', 405, /GET is not allowed .*use POST/, 'POST'],
    ['POST', '/eth/v1/events?topics=head', 405, /use GET/, 'GET'],
  ];
  for (const [name, prefix] of Object.entries(prefixes)) {
    for (const [method, path, status, message, allow] of refusals) {
      const a = await call(g.base, { method, path: prefix + path, ...(method === 'GET' ? {} : { body: '[]' }) });
      assertBeaconError(t, a, status, message, `${method} ${path} ${name}`);
      if (allow !== undefined) t.equal(a.headers.allow, allow, `${method} ${path}: Allow ${allow}`);
    }
  }
  t.same(forwarded(node), [], `none of the ${2 * refusals.length} refusals reached the node`);

  // Query strings pass through byte for byte, percent-encoding and repeats included.
  const passed = [
    ['GET', '/eth/v1/beacon/states/head/validators?id=1,2&id=0xab&status=active_ongoing'],
    ['GET', '/eth/v1/beacon/headers?slot=12&parent_root=0x' + '01'.repeat(32)],
    ['GET', '/eth/v1/validator/attestation_data?slot=7&committee_index=0&x=%2e%2e%2F'],
    ['POST', '/eth/v1/beacon/states/finalized/validator_balances?trace=1'],
    ['GET', '/eth/v2/beacon/blocks/0x' + 'Ab'.repeat(32)],
    ['GET', '/eth/v1/validator/duties/attester/1?index=1,2&index=3'],
    ['POST', '/eth/v1/validator/duties/attester/1'],
  ] as const;
  for (const [method, target] of passed) {
    const before = forwarded(node).length;
    const a = await call(g.base, { method, path: prefixes.keyed + target, ...(method === 'POST' ? { body: '["1"]' } : {}) });
    t.equal(a.status, 200, `${target}: forwarded`);
    t.same(json(a), { data: { method, target } }, `${target}: the node's answer, untouched`);
    t.same(
      forwarded(node)
        .slice(before)
        .map((r) => `${r.method} ${r.target}`),
      [`${method} ${target}`],
      `${target}: the node saw exactly this request`,
    );
  }
});

t.test('a Beacon POST body over server.max_body_bytes is 413 in the Beacon shape and never reaches the node', async (t) => {
  const node = await fakeBeacon(t);
  const max = 1024;
  const g = await gatewayFor(t, {
    server: { max_body_bytes: max },
    chains: { 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: node.url }] } },
  });
  const path = '/v1/rpc/public/eth/v1/beacon/states/head/validator_balances';
  const body = (size: number): string => `["${'1'.repeat(size - 4)}"]`;
  const over = await call(g.base, { method: 'POST', path, body: body(max + 1) });
  assertBeaconError(t, over, 413, `Request body is larger than the limit of ${max} bytes (server.max_body_bytes)`, 'one byte over');
  t.same(forwarded(node), [], 'the node never saw it');
  const at = await call(g.base, { method: 'POST', path, body: body(max) });
  t.equal(at.status, 200, 'a body of exactly the limit is forwarded');
  t.same(
    forwarded(node).map((r) => `${r.method} ${r.target}`),
    ['POST /eth/v1/beacon/states/head/validator_balances'],
  );
});

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

t.test('a 200 MB debug state streams through the daemon: every byte arrives, RSS grows by at most 64 MB', async (t) => {
  const SIZE = 200 * 1024 * 1024;
  const node = await fakeBeacon(t, {
    answer: (req, res) => {
      if (req.url === '/eth/v2/debug/beacon/states/head') streamBody(res, SIZE);
      else res.writeHead(200, { 'content-type': 'application/json', 'content-length': '2' }).end('{}');
    },
  });
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-beacon-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const cfg = join(dir, 'config.yaml');
  writeFileSync(
    cfg,
    `server: { host: 127.0.0.1, port: 0 }\nstorage: { path: ${dir}/db.sqlite }\nchains:\n  devnet-beacon:\n    kind: beacon\n    upstreams: [{ url: "${node.url}" }]\n`,
  );
  const { child, port } = await startDaemon(t, cfg);
  const base = `http://127.0.0.1:${port}/v1/rpc/public`;
  // Warm up, so the baseline holds what every request needs.
  t.equal((await call(`${base}/eth/v1/node/version`)).status, 200);
  const baseline = rssOf(child.pid!);
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(child.pid!))), 10);
  const got = await new Promise<{ status: number; bytes: number; type: string | undefined; version: unknown }>((resolve, reject) => {
    const req = httpRequest(`${base}/eth/v2/debug/beacon/states/head`, { agent: false }, (res) => {
      let bytes = 0;
      res.on('data', (d: Buffer) => (bytes += d.length));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, bytes, type: res.headers['content-type'], version: res.headers['eth-consensus-version'] }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
  clearInterval(sampler);
  peak = Math.max(peak, rssOf(child.pid!));
  t.equal(got.status, 200);
  t.equal(got.bytes, SIZE, `all ${SIZE} bytes arrived`);
  t.equal(got.type, 'application/json');
  t.equal(got.version, 'electra');
  const growth = peak - baseline;
  t.ok(
    growth <= 64 * 1024 * 1024,
    `daemon RSS grew by ${(growth / 1048576).toFixed(1)} MB (baseline ${(baseline / 1048576).toFixed(1)} MB) for a 200 MB answer`,
  );
});

t.test('a node that cannot be reached, or hangs past timeout_s, gives 502 in the Beacon shape', async (t) => {
  const hanging = await fakeUpstream(t, 'hang');
  const down = await closedPort();
  const g = await gatewayFor(t, {
    chains: {
      down: { kind: 'beacon', upstreams: [{ url: `http://127.0.0.1:${down}` }] },
      hangs: { kind: 'beacon', timeout_s: 1, upstreams: [{ url: hanging.url }] },
    },
    server: { default_chain: 'down' },
  });
  const refused = await call(`${g.base}/down/v1/rpc/public/eth/v1/node/version`);
  assertBeaconError(t, refused, 502, 'Upstream node error', 'connection refused');
  const before = hanging.requests.length;
  const started = performance.now();
  const slow = await call(`${g.base}/hangs/v1/rpc/public/eth/v2/beacon/blocks/head`);
  const took = performance.now() - started;
  assertBeaconError(t, slow, 502, 'Upstream node error', 'hang past timeout_s');
  t.ok(took >= 900 && took < 3000, `abandoned after about 1 s (${Math.round(took)} ms)`);
  t.ok(
    hanging.requests.slice(before).some((r) => r.startsWith('GET /eth/v2/beacon/blocks/head HTTP/1.1')),
    'the hanging node did get the request',
  );
});

t.test('only JSON, SSZ and event-stream answers pass: an HTML or untyped body is 502, and a GET tries another node', async (t) => {
  const SCRIPT = '<html><script>fetch("/api/dashboard/account")</script></html>';
  /** What each path of the node answers: its Content-Type (none when undefined) and body. */
  const answers: Record<string, [string | undefined, string]> = {
    '/eth/v1/node/peers': ['text/html; charset=utf-8', SCRIPT],
    '/eth/v1/node/identity': [undefined, SCRIPT],
    '/eth/v1/node/peer_count': ['text/plain', 'just text'],
    '/eth/v1/node/syncing': ['application/json; charset=utf-8', '{"data":{"is_syncing":false}}'],
    '/eth/v1/beacon/genesis': ['Application/JSON', '{"data":{}}'],
    '/eth/v2/beacon/blocks/head': ['application/octet-stream', 'ssz-bytes'],
    // The gateway's head probe gets a head, so the node's health counts the clients' calls alone.
    '/eth/v1/beacon/headers/head': ['application/json', '{"data":{"header":{"message":{"slot":"7"}}}}'],
  };
  const serve = (path: string, res: import('node:http').ServerResponse): void => {
    const [type, body] = answers[path] ?? ['application/json', '{}'];
    res.writeHead(200, { ...(type !== undefined ? { 'content-type': type } : {}), 'content-length': Buffer.byteLength(body) }).end(body);
  };
  const node = await fakeBeacon(t, { answer: (req, res) => serve((req.url ?? '').split('?')[0]!, res) });
  const g = await gatewayFor(t, { chains: { 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: node.url }] } } });
  const base = `${g.base}/v1/rpc/public`;
  // What passes first: the node's refused answers count as failures in its health, and three in a row take it
  // out of rotation.
  const typed = await call(`${base}/eth/v1/node/syncing`);
  t.equal(typed.status, 200, 'JSON with a charset passes');
  t.equal(typed.headers['content-type'], 'application/json; charset=utf-8');
  const cased = await call(`${base}/eth/v1/beacon/genesis`);
  t.equal(cased.status, 200, `the type is read without regard to case (${cased.body.toString()})`);
  const ssz = await call(`${base}/eth/v2/beacon/blocks/head`, { headers: { accept: 'application/octet-stream' } });
  t.equal(ssz.status, 200, `SSZ passes (${ssz.body.toString()})`);
  t.equal(ssz.headers['content-type'], 'application/octet-stream');
  t.equal(ssz.body.toString(), 'ssz-bytes');
  const html = await call(`${base}/eth/v1/node/peers`);
  assertBeaconError(
    t,
    html,
    502,
    'The node answered with Content-Type "text/html; charset=utf-8"; the gateway passes only application/json, application/octet-stream and text/event-stream',
    'an HTML page',
  );
  t.notOk(html.body.toString().includes('<script>'), 'not a byte of the page reaches the client');
  assertBeaconError(t, await call(`${base}/eth/v1/node/identity`), 502, /answered with no Content-Type/, 'a body without a type');
  assertBeaconError(t, await call(`${base}/eth/v1/node/peer_count`), 502, /Content-Type "text\/plain"/, 'plain text');

  // Two nodes, the first behind a proxy that answers an HTML error page: a GET gets the second's answer.
  const good = await fakeBeacon(t);
  const bad = await fakeBeacon(t, {
    answer: (req, res) => {
      // The gateway's own probes get JSON, so the node stays in rotation for the clients' calls.
      if (BACKGROUND.has(`${req.method} ${req.url}`)) serve(req.url ?? '', res);
      else res.writeHead(502, { 'content-type': 'text/html' }).end('<html>Bad Gateway</html>');
    },
  });
  const two = await gatewayFor(t, {
    chains: { 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: bad.url }, { url: good.url }] } },
  });
  for (let i = 0; i < 6; i++) {
    const a = await call(`${two.base}/v1/rpc/public/eth/v1/node/syncing`);
    t.equal(a.status, 200, `request ${i + 1}: the JSON node's answer`);
    t.match(a.headers['content-type'], /^application\/json/);
  }
  t.ok(
    forwarded(bad).some((r) => r.target === '/eth/v1/node/syncing'),
    'the HTML node was asked, and its answer dropped',
  );
});

t.test('RU: a keyed caller pays the path price; 402, 429 and 401 in the Beacon shape', async (t) => {
  const { g, anvil, node } = await devnetBeacon(t, { public: { rps_per_ip: 5 } });
  await anvilCall(anvil, 'anvil_mine', ['0x40']);
  await waitFor(() => node.headSlot() === 64, { what: 'the beacon node at slot 64', ms: 10_000 });
  const ledger = g.gateway.context.tenancy.ledger;
  const rich = endpointFor(g, 'devnet-beacon', 1_000_000);
  const base = `${g.base}/devnet-beacon/v1/rpc/${rich.key}`;
  const prices: Array<[path: string, ru: number]> = [
    ['/eth/v1/node/version', 15],
    ['/eth/v1/node/health', 15],
    ['/eth/v1/node/syncing', 15],
    ['/eth/v1/beacon/genesis', 20],
    ['/eth/v1/beacon/states/head/finality_checkpoints', 20],
    ['/eth/v1/beacon/blocks/head/root', 20],
    ['/eth/v1/beacon/headers/head', 25],
    ['/eth/v1/config/spec', 75],
    ['/eth/v1/validator/duties/proposer/1', 80],
    ['/eth/v1/validator/duties/attester/1?index=1,2', 20],
    ['/eth/v2/beacon/blocks/head', 500],
    ['/eth/v1/beacon/blob_sidecars/head', 500],
    ['/eth/v1/beacon/states/head/validators', 500],
    ['/eth/v1/beacon/states/head/validators/1', 500],
    ['/eth/v1/beacon/states/head/validator_balances', 500],
    ['/eth/v1/beacon/states/head/committees', 2000],
    ['/eth/v2/debug/beacon/states/head', 2000],
    ['/eth/v1/config/fork_schedule', 20],
    ['/eth/v1/node/peers', 20],
  ];
  // A full state is megabytes (the mainnet preset's vectors): it pays the size surcharge on top, 100% per started MiB past the first.
  const surcharged = new Set(['/eth/v2/debug/beacon/states/head']);
  let spent = 0;
  for (const [path, ru] of prices) {
    const before = ledger.available(rich.ownerId);
    const a = await call(base + path);
    t.equal(a.status, 200, `${path}: 200`);
    const extraMiB = surcharged.has(path) ? Math.ceil((a.body.length - 1_048_576) / 1_048_576) : 0;
    if (surcharged.has(path)) t.ok(extraMiB > 0, `${path}: ${a.body.length} bytes, over 1 MiB`);
    else t.ok(a.body.length < 1_048_576, `${path}: under 1 MiB, so no size surcharge`);
    t.equal(
      before - ledger.available(rich.ownerId),
      ru * (1 + extraMiB),
      `${path} costs ${ru} RU${extraMiB ? ` and ${extraMiB} × ${ru} for its size` : ''}`,
    );
    spent += ru * (1 + extraMiB);
  }
  const posted = ledger.available(rich.ownerId);
  t.equal((await call(`${base}/eth/v1/beacon/states/head/validators`, { method: 'POST', body: '{"ids":["1"]}' })).status, 200);
  t.equal(posted - ledger.available(rich.ownerId), 500, "the POST form of validators has the GET form's price");
  const refusedFree = ledger.available(rich.ownerId);
  t.equal((await call(`${base}/eth/v1/beacon/states/bad/root`)).status, 400);
  t.equal(ledger.available(rich.ownerId), refusedFree, 'a refused call costs nothing');
  ledger.flush();
  t.equal(ledger.available(rich.ownerId), 1_000_000 - spent - 500, 'the flushed balance is the sum of the prices');

  const poor = endpointFor(g, 'devnet-beacon', 100);
  const poorBase = `${g.base}/devnet-beacon/v1/rpc/${poor.key}`;
  const block = await call(`${poorBase}/eth/v2/beacon/blocks/head`);
  assertBeaconError(t, block, 402, 'Insufficient RU balance', '500 RU with 100 left');
  t.equal(ledger.available(poor.ownerId), 100, 'the 402 charged nothing');
  t.equal((await call(`${poorBase}/eth/v1/node/version`)).status, 200, 'a path it can afford still answers');
  t.equal(ledger.available(poor.ownerId), 85);

  const unknown = await call(`${g.base}/devnet-beacon/v1/rpc/${'x'.repeat(32)}/eth/v1/node/version`);
  assertBeaconError(t, unknown, 401, 'Missing or invalid API key', 'unknown key');

  // The public path: public.rps_per_ip is 5 in this gateway.
  const started = performance.now();
  const burst = await Promise.all(Array.from({ length: 20 }, () => call(`${g.base}/devnet-beacon/v1/rpc/public/eth/v1/node/version`)));
  const took = performance.now() - started;
  const limited = burst.filter((a) => a.status === 429);
  const served = burst.filter((a) => a.status === 200);
  t.equal(served.length + limited.length, 20, 'each answer is 200 or 429');
  t.ok(limited.length > 0, `${limited.length} of 20 refused`);
  if (took < 900) t.equal(served.length, 5, `within one second, exactly rps_per_ip served (${Math.round(took)} ms)`);
  assertBeaconError(t, limited[0]!, 429, 'Rate limit exceeded', 'over public.rps_per_ip');
  t.match(limited[0]!.headers['retry-after'], /^[1-9]\d*$/, 'Retry-After in whole seconds');
});

t.test('402 and the key check refuse before the node, counted by a fake node', async (t) => {
  const node = await fakeBeacon(t);
  const g = await gatewayFor(t, { chains: { 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: node.url }] } } });
  const poor = endpointFor(g, 'devnet-beacon', 499);
  assertBeaconError(
    t,
    await call(`${g.base}/v1/rpc/${poor.key}/eth/v2/debug/beacon/states/head`),
    402,
    'Insufficient RU balance',
    'debug state with 499 RU',
  );
  assertBeaconError(
    t,
    await call(`${g.base}/v1/rpc/${poor.key}/eth/v2/beacon/blocks/head`),
    402,
    'Insufficient RU balance',
    'v2 block with 499 RU',
  );
  assertBeaconError(
    t,
    await call(`${g.base}/v1/rpc/${'y'.repeat(32)}/eth/v1/config/spec`),
    401,
    'Missing or invalid API key',
    'unknown key',
  );
  t.same(forwarded(node), [], 'no refused call reached the node');
  t.equal((await call(`${g.base}/v1/rpc/${poor.key}/eth/v1/beacon/blocks/head/root`)).status, 200);
  t.same(
    forwarded(node).map((r) => r.target),
    ['/eth/v1/beacon/blocks/head/root'],
    'an affordable call did',
  );
});
