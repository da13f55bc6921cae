/**
 * What every answer of the gateway says besides its body, on every route and listener: `X-Content-Type-Options:
 * nosniff` on JSON-RPC (whole and refused), Beacon (passed on, streamed, refused, the event stream), the
 * management API, the dashboard, health, the metrics listener, route errors and CORS preflights; and
 * `Cache-Control: no-store` on every management answer, the 201 that shows a new key above all. A real
 * gateway in front of a real anvil and a fake Beacon node.
 */
import t from 'tap';
import { createOwnerAdmin } from '../../src/tenancy/owners.js';
import { openEventStream } from '../support/event-stream.js';
import { fakeBeacon, streamBody } from '../support/fake-beacon.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { post, type RawAnswer, send } from '../support/rpc.js';

const anvil = await anvilFor(t);
const beacon = await fakeBeacon(t, {
  answer: (req, res) => {
    if (req.url === '/eth/v2/debug/beacon/states/head') streamBody(res, 1 << 20);
    else res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":{}}');
  },
});
const g = await gatewayFor(t, {
  server: { default_chain: 'devnet', cors_origins: ['*'] },
  chains: { devnet: evmChain([anvil.url]), 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: beacon.url }] } },
});
const owner = createOwnerAdmin(g.gateway.context.tenancy.store!).createOwner('headers', 'free', 1_000_000);
const auth = { authorization: `Bearer ${owner.managementKey}` };
const metrics = `http://127.0.0.1:${g.gateway.metricsPort}`;
const CALL = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}';

/** Every route, by name: how to ask it, and the status it answers. */
const ROUTES: ReadonlyArray<readonly [string, () => Promise<RawAnswer>, number]> = [
  ['JSON-RPC call', () => post(`${g.base}/v1/rpc/public`, CALL), 200],
  ['JSON-RPC wrong key', () => post(`${g.base}/v1/rpc/not-a-key`, CALL), 401],
  ['JSON-RPC wrong content type', () => post(`${g.base}/v1/rpc/public`, CALL, { 'content-type': 'text/plain' }), 415],
  ['route error', () => send('GET', `${g.base}/nowhere`), 404],
  ['CORS preflight', () => send('OPTIONS', `${g.base}/v1/rpc/public`, undefined, { origin: 'https://app.example' }), 204],
  ['Beacon answer', () => send('GET', `${g.base}/devnet-beacon/v1/rpc/public/eth/v1/node/version`), 200],
  ['Beacon streamed answer', () => send('GET', `${g.base}/devnet-beacon/v1/rpc/public/eth/v2/debug/beacon/states/head`), 200],
  ['Beacon refusal', () => send('GET', `${g.base}/devnet-beacon/v1/rpc/public/eth/v1/nowhere`), 404],
  ['management account', () => send('GET', `${g.base}/api/dashboard/account`, undefined, auth), 200],
  ['management wrong key', () => send('GET', `${g.base}/api/dashboard/account`, undefined, { authorization: 'Bearer nope' }), 401],
  ['management unknown route', () => send('GET', `${g.base}/api/dashboard/nowhere`, undefined, auth), 404],
  ['management wrong verb', () => send('PUT', `${g.base}/api/dashboard/chains`, undefined, auth), 405],
  ['management bad body', () => post(`${g.base}/api/dashboard/endpoints`, '{', auth), 400],
  ['dashboard page', () => send('GET', `${g.base}/dashboard`), 200],
  ['dashboard missing file', () => send('GET', `${g.base}/dashboard/nothing.js`), 404],
  ['health', () => send('GET', `${g.base}/healthz`), 200],
  ['health, HEAD', () => send('HEAD', `${g.base}/healthz`), 200],
  ['readiness', () => send('GET', `${g.base}/readyz`), 200],
  ['metrics', () => send('GET', `${metrics}/metrics`), 200],
  ['status', () => send('GET', `${metrics}/status`), 200],
  ['metrics listener, no route', () => send('GET', `${metrics}/nowhere`), 404],
];

t.test('every answer, on every route, says nosniff', async (t) => {
  for (const [name, ask, status] of ROUTES) {
    const a = await ask();
    t.equal(a.status, status, `${name}: ${status} (${a.text.slice(0, 120)})`);
    t.equal(a.headers['x-content-type-options'], 'nosniff', `${name}: nosniff`);
  }
  const stream = await openEventStream(`${g.base}/devnet-beacon/v1/rpc/public/eth/v1/events?topics=head`);
  t.teardown(() => stream.close());
  t.equal(stream.status, 200, 'the event stream opened');
  t.equal(stream.headers['x-content-type-options'], 'nosniff', 'event stream: nosniff');
});

t.test('every management answer says no-store, the new key first', async (t) => {
  const made = await post(`${g.base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet' }), auth);
  t.equal(made.status, 201);
  t.match(made.json, { data: { api_key: String } }, 'the answer shows the new key');
  t.equal(made.headers['cache-control'], 'no-store', '201 with the key: no-store');
  for (const [name, ask] of ROUTES.filter(([n]) => n.startsWith('management'))) {
    t.equal((await ask()).headers['cache-control'], 'no-store', `${name}: no-store`);
  }
  const list = await send('GET', `${g.base}/api/dashboard/endpoints`, undefined, auth);
  t.equal(list.headers['cache-control'], 'no-store', 'the list of endpoints: no-store');
});
