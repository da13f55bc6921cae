/**
 * docs/fleet.md's PostgreSQL and Redis, as printed: its roles.sql run by psql on a real PostgreSQL, the
 * migration as the owner with its migrate.yaml, its redis.conf (the ACL user included) on a real Redis,
 * and a gateway in fleet mode on the gateway's role and that ACL user serving keys, usage, a rotation and a
 * deletion. The role's limits are proved too: it cannot migrate, create, drop or truncate, and a role
 * the script did not let in cannot connect.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { runTenancy } from '../support/tenancy-cli.js';
import { loadStoreConfigFile } from '../../src/config/load.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';
import { rpc, send } from '../support/rpc.js';
import { startPostgres, startRedis } from '../support/servers.js';
import { waitFor } from '../support/wait-for.js';
import { blockOf, ROOT, swapped } from './doc-blocks.js';

const DOC = 'docs/fleet.md';

function psql(port: number, user: string, db: string, args: string[]): { ok: boolean; err: string } {
  const r = spawnSync('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', user, '-d', db, '-X', '-q', '-v', 'ON_ERROR_STOP=1', ...args], {
    encoding: 'utf8',
  });
  return { ok: r.status === 0, err: r.stderr };
}

/** The guide's redis.conf, with only its address, port and folder swapped. */
function guideRedisConf({ port, dir }: { port: number; dir: string }): string {
  const conf = swapped(blockOf(DOC, '', 'user chaingate on'), [
    ['bind 10.0.0.6', 'bind 127.0.0.1'],
    ['port 6379', `port ${port}`],
  ]);
  return `${conf}dir ${dir}\n`;
}

t.test("the guide's roles, migration and Redis serve a fleet instance, and no more", async (t) => {
  const [pg, node, redis] = await Promise.all([startPostgres(t), anvilFor(t), startRedis(t, { configFile: guideRedisConf })]);
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-fleet-guide-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));

  // The test cluster comes with a role and a database named as the guide's: start from none.
  t.ok(psql(pg.port, 'postgres', 'postgres', ['-c', 'DROP DATABASE chaingate', '-c', 'DROP ROLE chaingate']).ok);
  writeFileSync(join(dir, 'roles.sql'), blockOf(DOC, 'sql', 'roles.sql'));
  const roles = psql(pg.port, 'postgres', 'postgres', ['-f', join(dir, 'roles.sql')]);
  t.ok(roles.ok, 'roles.sql runs', { err: roles.err });

  const gatewayUrl = `postgres://chaingate:change-me-gateway@127.0.0.1:${pg.port}/chaingate`;
  const documentedRedis = /cluster\.redis_url: (redis:\/\/\S+)`/.exec(readFileSync(join(ROOT, DOC), 'utf8'))?.[1];
  if (documentedRedis === undefined) throw new Error(`${DOC} names no cluster.redis_url for the ACL user`);
  const redisUrl = swapped(documentedRedis, [['10.0.0.6:6379', `127.0.0.1:${redis.port}`]]);
  const instance = (name: string) =>
    gatewayFor(t, {
      storage: { url: gatewayUrl },
      // closed: a script the ACL refused would answer 503 instead of falling back to local limits.
      cluster: { redis_url: redisUrl, instance: name, redis_failure: 'closed' },
      chains: { devnet: evmChain([node.url]) },
    });

  await t.rejects(
    instance('too-early'),
    /schema is version 0 and this chaingate needs \d+, which this role may not create/,
    'the gateway role cannot migrate',
  );

  const migrate = join(dir, 'migrate.yaml');
  writeFileSync(migrate, swapped(blockOf(DOC, 'yaml', 'chaingate_admin'), [['10.0.0.5:5432', `127.0.0.1:${pg.port}`]]));
  const loaded = loadStoreConfigFile(migrate, { CHAINGATE_ADMIN_PASSWORD: 'change-me-admin' });
  if (!loaded.ok) throw new Error(loaded.errors.join('\n'));
  t.match(blockOf(DOC, 'sh', 'migrate.yaml'), /chaingate owner list --config \/etc\/chaingate\/migrate\.yaml/);
  const { code, err } = await runTenancy(loaded.config, 'owner', 'list');
  t.equal(code, 0, 'the owner role migrates', { err });

  const g = await instance('gw-1');
  const owner = await g.gateway.context.tenancy.accounts.createOwner('guide', 'free', 1_000_000);
  const bearer = { authorization: `Bearer ${owner.managementKey}`, 'content-type': 'application/json' };
  const created = await send('POST', `${g.base}/api/dashboard/endpoints`, JSON.stringify({ network: 'devnet' }), bearer);
  t.equal(created.status, 201, 'an endpoint is made');
  const { id, api_key: key } = (created.json as { data: { id: string; api_key: string } }).data;
  for (let i = 0; i < 5; i++)
    t.equal((await rpc(`${g.base}/v1/rpc/${key}`, 'eth_chainId')).status, 200, 'a keyed call, limited through Redis');
  await waitFor(
    async () => ((await g.gateway.context.tenancy.accounts.owner(owner.id))?.ruBalance ?? Number.POSITIVE_INFINITY) < 1_000_000,
    {
      what: 'usage written and charged',
      ms: 5000,
    },
  );
  const rotated = await send('POST', `${g.base}/api/dashboard/endpoints/rotate?id=${id}`, JSON.stringify({ grace_s: 0 }), bearer);
  t.equal(rotated.status, 200, 'a key is rotated');
  const deleted = await send('DELETE', `${g.base}/api/dashboard/endpoints?id=${id}`, undefined, bearer);
  t.equal(deleted.status, 200, 'an endpoint is deleted (a number drawn from the deletions sequence)');
  const metrics = await (await fetch(`http://127.0.0.1:${g.gateway.metricsPort}/metrics`)).text();
  t.match(metrics, /chaingate_cluster_redis_up 1/, 'Redis decides the limits');
  t.notOk(
    g.logLines.some((l) => /Redis unreachable|NOPERM/.test(l)),
    'the ACL user may run every script',
  );

  for (const sql of [
    'CREATE TABLE intruded (a int)',
    'DROP TABLE owners',
    'TRUNCATE usage_batches',
    'ALTER TABLE owners ADD COLUMN x int',
  ]) {
    const r = psql(pg.port, 'chaingate', 'chaingate', ['-c', sql]);
    t.notOk(r.ok, `the gateway's role may not: ${sql}`);
    t.match(r.err, /permission denied|must be owner/);
  }
  t.ok(psql(pg.port, 'postgres', 'postgres', ['-c', 'CREATE ROLE intruder LOGIN']).ok);
  const other = psql(pg.port, 'intruder', 'chaingate', ['-c', 'SELECT 1']);
  t.notOk(other.ok, 'a role the script did not let in cannot connect, so cannot notify');
  t.match(other.err, /permission denied for database/);
});
