/**
 * A fleet instance (PostgreSQL, Redis, anvil) against notices another database role forges on the change
 * channel, which any role that may connect can send: a forged `endpoint_deleted` for a live key closes no
 * subscription and the key keeps working over HTTP; junk is dropped, counted by reason in the metrics and
 * logged once per reason, whatever its number.
 */
import pg from 'pg';
import t from 'tap';
import WebSocket from 'ws';
import { CHANGES_CHANNEL } from '../../src/accounts/pg-changes.js';
import { scrape } from '../support/exposition.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { rpc } from '../support/rpc.js';
import { startPostgres, startRedis } from '../support/servers.js';
import { waitFor } from '../support/wait-for.js';

t.test('notices forged by another role', async (t) => {
  const [node, server, redis] = await Promise.all([anvilFor(t), startPostgres(t), startRedis(t)]);
  const g = await gatewayFor(t, {
    storage: { url: server.url },
    cluster: { redis_url: redis.url, instance: 'gw-a' },
    plans: { fleet: { rps: 100_000, max_endpoints: 10 } },
    chains: { devnet: evmChain([node.url]) },
  });
  const accounts = g.gateway.context.tenancy.accounts;
  const owner = await accounts.createOwner('tenant', 'fleet', 1_000_000);
  const made = await accounts.createEndpoint(owner.id, 'devnet', 'live', 10);
  if (!('apiKey' in made)) throw new Error(made.error);
  const url = `${g.base}/v1/rpc/${made.apiKey}`;
  t.equal((await rpc(url, 'eth_chainId')).status, 200);
  const ws = new WebSocket(url.replace('http', 'ws'));
  await new Promise((r, j) => ws.once('open', r).once('error', j));
  const closes: number[] = [];
  ws.on('close', (code) => closes.push(code));
  ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] }));
  await new Promise((r) => ws.once('message', r));

  // Another role: it may connect, so it may notify any channel (PostgreSQL has no grant for that).
  const admin = new pg.Client({ connectionString: server.url.replace('chaingate@', 'postgres@') });
  await admin.connect();
  await admin.query('CREATE ROLE intruder LOGIN');
  await admin.end();
  const evil = new pg.Client({ connectionString: server.url.replace('chaingate@', 'intruder@') });
  evil.on('error', () => {});
  await evil.connect();
  t.teardown(() => evil.end().catch(() => {}));
  const notify = (payload: string) => evil.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, payload]);

  await notify(JSON.stringify({ kind: 'endpoint_deleted', endpointId: made.endpoint.id, ownerId: owner.id }));
  for (let i = 0; i < 50; i++) await notify(`junk ${i}`);
  await notify('{"kind":"owner_renamed","ownerId":1}');
  const port = g.gateway.metricsPort!;
  const ignored = async (reason: string): Promise<number> =>
    (await scrape(port)).series('chaingate_change_notices_ignored_total').find((s) => s.labels.reason === reason)?.value ?? 0;
  await waitFor(async () => (await ignored('not_json')) === 50, { what: 'the junk counted, by reason', ms: 3000 });
  t.equal(await ignored('unknown_kind'), 1);
  // Time for a revocation to have closed the socket, had the forged notice been believed.
  await new Promise((r) => setTimeout(r, 500));
  t.equal(ws.readyState, WebSocket.OPEN, 'the subscription stays open');
  t.same(closes, []);
  t.equal((await rpc(url, 'eth_chainId')).status, 200, 'the key keeps working over HTTP');
  const warned = g.logLines.filter((l) => l.includes('does not parse was ignored'));
  t.equal(warned.length, 2, 'logged once per reason, not once per notice');
  t.match(warned[0], /reason=not_json/);

  // A real deletion is believed once the store confirms it: the subscription closes.
  t.equal(await accounts.deleteEndpoint(owner.id, made.endpoint.id), true);
  await waitFor(() => closes.length > 0, { what: 'a real deletion closes it', ms: 2000 });
  t.same(closes, [1008]);
  ws.terminate();
});
