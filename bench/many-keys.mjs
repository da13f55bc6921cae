// Section: forwarded calls through API keys when a gateway serves many of them. One gateway holds
// BENCH_KEYS endpoints (20,000 by default) and is loaded twice, back to back: every request through one
// key, then each request through a key picked at random among all of them. A key seen lately must not
// cost a store read, whatever the gateway's other threads write meanwhile (issue 30, part 4). With
// BENCH_BASELINE, the baseline build runs the same two loads in every round. See bench/README.md (many-keys).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chaingateConfig, chaingateMain, serveChaingate } from './lib/chaingate.mjs';
import { checkerFor } from './lib/checks.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { freePort } from './lib/net.mjs';
import { measure, notRun } from './lib/measure.mjs';
import { cpuProfArgs, stopGraceMs } from './lib/profiles.mjs';
import { int } from './lib/settings.mjs';
import { FIXED_UPSTREAM_CHAIN_ID, startFixedUpstream } from './lib/upstreams.mjs';

export const id = 'many-keys';
export const title = 'Forwarded calls through one key and through random keys among many (workers: 2, fixed upstream)';
export const needs = ['wrk'];

const TARGETS = {
  rpsRandom: 0.9, // req/s random keys / one key at least (issue 30: "≥ 0.9× the one-key rate")
  p99Random: 1.0, // p99 random keys / one key at most ("p99 no higher")
};

/**
 * Keys per second of the random load's warm-up: 20,000 keys warm for 14 s, about 200,000 calls at 15,000 a
 * second, ten per key, five per worker of two: each has then met all but e^-5 (under 1 %) of the keys.
 */
const WARM_KEYS_PER_SECOND = 1500;

/** Figures kept for each round of a merged run, which the checks pair round by round (lib/rounds.mjs). */
const ROUND_FIELDS = ['cpuUsPerRequest'];

/**
 * Makes the database of `main`'s build at `path` before it serves (its own openStore, so a baseline gets its
 * own schema): one owner with RU for far more calls than a run makes, and `count` endpoints inserted in one
 * transaction, as the management REST would store them but without 20,000 round trips, each with a usage
 * row in each of the last `minutes` minutes: the history a gateway serving these keys for that long holds,
 * into which its ledger writes. Returns the keys.
 */
async function seedStore(main, path, count, minutes) {
  const dist = dirname(main);
  const load = (file) => import(pathToFileURL(join(dist, file)).href);
  const [{ openStore }, { createOwnerAdmin }, { newEndpointId }, { newKey }] = await Promise.all([
    load('store/open.js'),
    load('tenancy/owners.js'),
    load('tenancy/endpoints.js'),
    load('tenancy/keys.js'),
  ]);
  const store = openStore(path);
  try {
    const { id: owner } = createOwnerAdmin(store).createOwner('bench', 'bench', 1_000_000_000_000);
    const insert = store.db.prepare(
      'INSERT INTO endpoints (id, owner_id, network, name, key_hash, key_prefix, created_at) VALUES (?, ?, ?, NULL, ?, ?, ?)',
    );
    const usage = store.db.prepare(
      `INSERT INTO usage_minute (endpoint_id, owner_id, method, t, status, requests, ru) VALUES (?, ?, 'eth_getBalance', ?, 0, 1, 20)`,
    );
    const keys = [];
    const at = Math.floor(Date.now() / 1000);
    const minute = at - (at % 60);
    store.db.transaction(() => {
      for (let i = 0; i < count; i++) {
        const key = newKey('api');
        const endpoint = newEndpointId();
        insert.run(endpoint, owner, 'bench', key.hash, key.prefix, at);
        for (let m = 1; m <= minutes; m++) usage.run(endpoint, owner, minute - 60 * m);
        keys.push(key.key);
      }
    })();
    return keys;
  } finally {
    store.close();
  }
}

/**
 * The wrk script: each request a POST of the next body in turn to `/v1/rpc/<key>`, the key the next of `keys`
 * (one key) or one of them at random. Every request is formatted in init(), so wrk's cost per request is the
 * same for both loads: only the gateway's differs.
 */
function writeKeysScript(path, keys, bodies, random) {
  writeFileSync(
    path,
    `local keys = {\n${keys.map((k) => `  "${k}",\n`).join('')}}
local bodies = {\n${bodies.map((b) => `  ${JSON.stringify(b)},\n`).join('')}}
local requests = {}
local turn = 0
function init(args)
  math.randomseed(os.time())
  for i, k in ipairs(keys) do
    requests[i] = wrk.format("POST", "/v1/rpc/" .. k, { ["Content-Type"] = "application/json" }, bodies[(i - 1) % #bodies + 1])
  end
end
function request()
  ${random ? 'return requests[math.random(#requests)]' : 'turn = turn % #requests + 1\n  return requests[turn]'}
end
`,
  );
  return path;
}

/** One build's gateway, seeded with the keys, loaded through one key and through random keys; its two runs. */
async function measureBuild({ build, upstream, keys: count, minutes, ctx }) {
  const rows = [
    { id: `${build.id}-one`, label: `${build.label}, one key`, random: false },
    { id: `${build.id}-random`, label: `${build.label}, random key among ${count.toLocaleString('en-US')}`, random: true },
  ];
  const dir = join(ctx.tmpdir, build.id);
  mkdirSync(dir, { recursive: true });
  let server;
  let keys;
  let port;
  const config = join(dir, 'chaingate.yaml');
  // Under BENCH_CPU_PROF each row gets a gateway of its own (on the same file), so that each row's
  // profiles are its own; else one gateway serves both rows, the random load meeting what the first left.
  const profiled = Boolean(ctx.settings.cpuProfDir);
  const start = (rowId) =>
    serveChaingate({
      name: build.id,
      main: build.main,
      config,
      port,
      core: ctx.settings.spreadCores,
      workers: build.workers,
      nodeArgs: profiled ? cpuProfArgs(ctx, rowId) : [],
    });
  try {
    port = await freePort();
    writeFileSync(
      config,
      chaingateConfig({
        dir,
        port,
        upstreamPort: upstream.port,
        chainId: FIXED_UPSTREAM_CHAIN_ID,
        workers: build.workers,
        extraYaml: 'metrics: { port: 0 }\n',
      }),
    );
    ctx.log(`${build.label}: making ${count.toLocaleString('en-US')} endpoints, ${minutes} minutes of usage each`);
    keys = await seedStore(build.main, join(dir, 'bench.db'), count, minutes);
    server = await start(rows[0].id);
  } catch (err) {
    await server?.stop();
    return rows.map(({ id, label }) => notRun({ id, label, reason: `did not start: ${err.message}`, error: true }));
  }
  const bodies = forwardedBodies(ctx.settings.connections);
  const runs = [];
  try {
    // One key first, always: the memory the random keys add is then the second run's RSS less the first's.
    for (const row of rows) {
      if (profiled && row !== rows[0]) {
        await server.stop(stopGraceMs(ctx));
        server = await start(row.id);
      }
      const script = writeKeysScript(join(dir, `${row.id}.lua`), row.random ? keys : [keys[0]], bodies, row.random);
      const url = `http://127.0.0.1:${port}/v1/rpc/${keys[0]}`;
      // Each worker keeps its own cache: the random load warms up until each has met nearly every key, as a
      // gateway serving these keys for hours would have, so that what is measured is the steady state.
      const warmupSeconds = row.random
        ? Math.max(ctx.settings.warmupSeconds, Math.ceil(count / WARM_KEYS_PER_SECOND))
        : ctx.settings.warmupSeconds;
      const run = await measure({
        id: row.id,
        label: row.label,
        url,
        pid: server.pid,
        upstreamPid: upstream.pid,
        ctx: { ...ctx, settings: { ...ctx.settings, warmupSeconds }, body: bodies[0], script },
      });
      runs.push({ ...run, roundFields: ROUND_FIELDS });
    }
  } finally {
    await server.stop(stopGraceMs(ctx));
  }
  return runs;
}

export async function run(ctx) {
  mkdirSync(ctx.tmpdir, { recursive: true });
  const errors = [];
  const count = int('BENCH_KEYS', 20_000, 1, 1_000_000, errors);
  const workers = int('BENCH_KEYS_WORKERS', 2, 1, 64, errors);
  const minutes = int('BENCH_KEYS_MINUTES', 60, 0, 24 * 60, errors);
  if (errors.length) throw new Error(errors.join('; '));
  const base = ctx.baseline;
  const builds = [
    { id: 'chaingate', label: `chaingate (workers: ${workers})`, main: chaingateMain(), workers },
    ...(base ? [{ id: 'baseline', label: `chaingate @${base.ref} (workers: ${workers})`, main: base.main, workers }] : []),
  ];
  let upstream;
  try {
    upstream = await startFixedUpstream({ name: 'many-keys-upstream', core: ctx.settings.loadCore });
  } catch (err) {
    return builds.flatMap((b) =>
      [`${b.id}-one`, `${b.id}-random`].map((id) =>
        notRun({ id, label: id, reason: `upstream did not start: ${err.message}`, error: true }),
      ),
    );
  }
  const runs = [];
  try {
    const round = Number(/-(\d+)$/.exec(ctx.tmpdir)?.[1] ?? 1);
    for (const build of round % 2 === 0 ? [...builds].reverse() : builds)
      runs.push(...(await measureBuild({ build, upstream, keys: count, minutes, ctx })));
  } finally {
    await upstream.stop();
  }
  return runs;
}

const check = checkerFor();

export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  const baselineRandom = by['baseline-random'] ?? { skipped: 'no BENCH_BASELINE' };
  const baselineOne = by['baseline-one'] ?? { skipped: 'no BENCH_BASELINE' };
  return [
    check(
      'req/s random key / one key',
      [by['chaingate-random'], by['chaingate-one']],
      (r, o) => r.rps / o.rps,
      `≥ ${TARGETS.rpsRandom}`,
      (v) => v >= TARGETS.rpsRandom,
    ),
    check(
      'p99 random key / one key',
      [by['chaingate-random'], by['chaingate-one']],
      (r, o) => r.p99Ms / o.p99Ms,
      `≤ ${TARGETS.p99Random}`,
      (v) => v <= TARGETS.p99Random,
    ),
    check(
      'RSS after random keys − after one key, MB',
      [by['chaingate-random'], by['chaingate-one']],
      (r, o) => r.maxRssMb - o.maxRssMb,
      'reported',
    ),
    check('req/s random key / one key, baseline', [baselineRandom, baselineOne], (r, o) => r.rps / o.rps, 'reported'),
    check('req/s random key chaingate / baseline', [by['chaingate-random'], baselineRandom], (c, b) => c.rps / b.rps, 'reported'),
  ];
}
