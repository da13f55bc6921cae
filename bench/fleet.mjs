// Section: one instance in fleet mode (keys, balances and usage in PostgreSQL, rate limits in Redis)
// against the same instance on SQLite, on the same keyed forwarded-call load in front of the fixed
// upstream, back to back in every round: what asking Redis and reserving RU from PostgreSQL cost a call.
// See bench/README.md (fleet).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chaingateMain, startChaingate } from './lib/chaingate.mjs';
import { checkerFor } from './lib/checks.mjs';
import { startPostgres, startRedis, hasRedis, postgresBin } from './lib/fleet-servers.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { measure, notRun } from './lib/measure.mjs';
import { FIXED_UPSTREAM_CHAIN_ID, startFixedUpstream } from './lib/upstreams.mjs';
import { writePostScript } from './lib/wrk.mjs';

export const id = 'fleet';
export const title = 'Fleet mode (PostgreSQL + Redis) against SQLite (eth_getBalance, API key, fixed upstream)';
/** Tools this section cannot run without (run.mjs skips it when one is missing). */
export const needs = ['wrk'];

/** Targets of this section (issue 20): the fleet instance's req/s within 10 % of the SQLite one's. */
const TARGETS = {
  rps: 0.9, // fleet / SQLite req/s, median of the per-round ratios
};

/**
 * RU an instance reserves at once from the owner's balance. The default (1,000: 66 calls at eth_getBalance's
 * 15 RU) would want over a hundred refills a second at this load; this block pays for 66,666 calls, one
 * every 7 s or so at 10,000 req/s, asked for in the background once half of it is spent, so the rows
 * measure the steady path: a Redis take per call, batched per event-loop turn, and the usage flushes.
 */
const RESERVATION_BLOCK_RU = 1_000_000;

/** Figures kept for each round of a merged run, which the checks pair round by round (lib/rounds.mjs). */
const ROUND_FIELDS = ['cpuUsPerRequest', 'serviceCpuUsPerRequest'];

const ROWS = [
  { id: 'fleet-sqlite', label: 'chaingate on SQLite (API key, metered) → fixed upstream' },
  { id: 'fleet-postgres', label: 'chaingate in fleet mode, PostgreSQL + Redis (API key, metered) → fixed upstream', fleet: true },
];

/** The store part of a fleet instance's config: the round's PostgreSQL and Redis. */
function fleetStorageYaml(pg, redis) {
  return `storage: { url: "${pg.url}" }
cluster: { redis_url: "${redis.url}", instance: bench-fleet, reservation_block_ru: ${RESERVATION_BLOCK_RU} }
`;
}

/** `node --cpu-prof` arguments when BENCH_FLEET_CPU_PROF names a directory (the profile is written on stop). */
function profileArgs(rowId) {
  const dir = process.env.BENCH_FLEET_CPU_PROF;
  return dir ? ['--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-name', `${rowId}-${Date.now()}.cpuprofile`] : [];
}

/** Starts one row's gateway and measures it; a gateway that fails to start becomes a flagged run. */
async function measureRow({ row, upstream, pg, redis, ctx }) {
  const { settings } = ctx;
  let gateway;
  try {
    gateway = await startChaingate({
      name: row.id,
      dir: join(ctx.tmpdir, row.id),
      upstreamPort: upstream.port,
      chainId: FIXED_UPSTREAM_CHAIN_ID,
      core: settings.serverCore,
      keyed: true,
      // A fleet instance runs one thread; the SQLite row gets the same.
      workers: 1,
      storageYaml: row.fleet ? fleetStorageYaml(pg, redis) : undefined,
      nodeArgs: profileArgs(row.id),
    });
  } catch (err) {
    return notRun({ id: row.id, label: row.label, reason: `did not start: ${err.message}`, error: true });
  }
  try {
    const run = await measure({
      id: row.id,
      label: row.label,
      url: gateway.url,
      pid: gateway.pid,
      upstreamPid: upstream.pid,
      servicePids: row.fleet ? [pg.pid, redis.pid] : [],
      ctx,
    });
    return { ...run, roundFields: ROUND_FIELDS };
  } finally {
    await gateway.stop();
  }
}

const check = checkerFor();

/** The section's targets, judged on its runs (merged across rounds by the caller). */
export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  const pair = [by['fleet-postgres'], by['fleet-sqlite']];
  return [
    check(
      'req/s fleet / SQLite',
      pair,
      (f, s) => f.rps / s.rps,
      `≥ ${TARGETS.rps}`,
      (v) => v >= TARGETS.rps,
    ),
    check('CPU per call fleet / SQLite (the gateway alone)', pair, (f, s) => f.cpuUsPerRequest / s.cpuUsPerRequest, 'reported'),
    check('p99 fleet / SQLite', pair, (f, s) => f.p99Ms / s.p99Ms, 'reported'),
    // What the shared servers spent on each call beside the gateway, in µs: the fleet's cost the row does not show.
    check('CPU µs per call of PostgreSQL + Redis, fleet', [by['fleet-postgres']], (f) => f.serviceCpuUsPerRequest, 'reported'),
  ];
}

/** Rounds run so far: the rows take turns going first, so neither always meets the round's fresh machine. */
let roundsRun = 0;

export async function run(sectionCtx) {
  const { settings } = sectionCtx;
  const cannotRun = (reason, error = true) => ROWS.map(({ id, label }) => notRun({ id, label, reason, error }));
  if (!chaingateMain()) return cannotRun('dist/main.js is missing: run npm run build');
  if (!postgresBin() || !hasRedis()) return cannotRun('PostgreSQL or Redis not installed (apt-get install postgresql redis-server)', false);
  mkdirSync(sectionCtx.tmpdir, { recursive: true });
  const bodies = forwardedBodies(settings.connections);
  const ctx = { ...sectionCtx, body: bodies[0], script: writePostScript(sectionCtx.tmpdir, bodies, 'fleet.lua') };
  const rows = roundsRun++ % 2 === 0 ? ROWS : [...ROWS].reverse();

  // The shared servers and the node run on the load core with wrk: the server core is the gateway's alone.
  const started = [];
  try {
    const upstream = await startFixedUpstream({ name: 'fleet-upstream', core: settings.loadCore });
    started.push(upstream);
    const pg = await startPostgres({ name: 'fleet-postgres-server', core: settings.loadCore });
    started.push(pg);
    const redis = await startRedis({ name: 'fleet-redis', core: settings.loadCore });
    started.push(redis);
    const runs = new Map();
    for (const row of rows) runs.set(row.id, await measureRow({ row, upstream, pg, redis, ctx }));
    return ROWS.map(({ id }) => runs.get(id));
  } catch (err) {
    return cannotRun(`a server did not start: ${err.message}`);
  } finally {
    for (const server of started.reverse()) await server.stop();
  }
}
