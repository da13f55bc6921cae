// Section: what a refused API key costs, per kind of key. One keyed gateway in front of the fixed upstream
// answers the same JSON-RPC POST with a random, a near-miss, a malformed, a deleted and a missing key, and
// with a new random key per request, the kinds taking turns in slices of a few seconds: their 401s must be
// the same bytes and take the same time, or the time of a refusal would tell a key that once existed from
// one that never did. See bench/README.md (auth-refusals).
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chaingateMain, createEndpoint, deleteEndpoint, startChaingate } from './lib/chaingate.mjs';
import { checkerFor } from './lib/checks.mjs';
import { measure, notRun } from './lib/measure.mjs';
import { measureInSlices } from './lib/slices.mjs';
import { checkJsonRpcResult, postJson } from './lib/net.mjs';
import { FIXED_UPSTREAM_CHAIN_ID, startFixedUpstream } from './lib/upstreams.mjs';
import { writeAnswerCheckScript } from './lib/wrk.mjs';

export const id = 'auth-refusals';
export const title = 'Refused API keys: 401 per kind of key (keyed path, fixed upstream)';
/** Tools this section cannot run without (run.mjs skips it when one is missing). */
export const needs = ['wrk'];

/** Targets of this section: each kind's req/s, p50 and CPU per request over the random key's, within this share of 1. */
const TARGETS = {
  spread: 0.1, // |kind / random − 1| at most, median of the per-round ratios
};

/**
 * The kinds of key, in the order of the table. The random key is the one the others are judged against;
 * the last row is shown beside them, not judged (see bench/README.md, auth-refusals).
 */
const KINDS = [
  { id: 'random', label: 'random key (32 base62 characters, never issued)' },
  { id: 'near-miss', label: 'near-miss key (a live key, its last character changed)', judged: true },
  { id: 'malformed', label: 'malformed key (not-a-key!)', judged: true },
  { id: 'deleted', label: 'deleted key (its endpoint deleted through the REST)', judged: true },
  { id: 'missing', label: 'no key (/v1/rpc/)', judged: true },
  // The same kind as the reference, judged the same way: how far apart two rows that cannot differ read
  // on this machine in this run, the yardstick for the rows above.
  { id: 'random-again', label: 'another random key (the same kind twice: the noise)', judged: true },
  // Every other row presents one key again and again, so after its first request the gateway answers it
  // from its memory of missing keys; this one pays the hash and the SQLite lookup every time. Measured
  // after the others, not in their turns.
  { id: 'new-random', label: 'random key, a new one per request (never remembered)' },
];

const MALFORMED = 'not-a-key!';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A well-formed API key: 32 base62 characters from the CSPRNG (bytes ≥ 248 dropped, so none is likelier). */
function randomKey() {
  let key = '';
  while (key.length < 32) {
    for (const b of randomBytes(64)) if (b < 248 && key.length < 32) key += BASE62[b % 62];
  }
  return key;
}

/**
 * The client address of each sample request, in 198.18.0.0/15 (set aside for benchmarks), one per
 * request: wrk's addresses are in 10.0.0.0/8, and none may present more than 20 unknown keys a minute.
 */
let samples = 0;
function sampleAddress() {
  const n = samples++ % 131_072;
  return `198.${18 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}`;
}

/** One request as the wrk script sends it; null when its answer is a 401 of exactly `expected`, else what came back. */
async function wrongRefusal(url, body, expected) {
  let res;
  try {
    res = await postJson(url, body, 5_000, { 'x-forwarded-for': sampleAddress() });
  } catch (err) {
    return `no answer: ${err.message}`;
  }
  const shown = res.body.length > 300 ? `${res.body.slice(0, 300)}...` : res.body;
  if (res.status !== 401) return `HTTP ${res.status}: ${shown}`;
  return res.body === expected ? null : `a 401 whose body differs from the random key's: ${shown}`;
}

/** The random key's 401 body, which every other kind must match byte for byte; throws when it is not a JSON-RPC 401. */
async function referenceRefusal(url, body) {
  const res = await postJson(url, body, 5_000, { 'x-forwarded-for': sampleAddress() });
  let parsed;
  try {
    parsed = JSON.parse(res.body);
  } catch {
    parsed = null;
  }
  if (res.status !== 401 || parsed?.jsonrpc !== '2.0' || parsed.id !== JSON.parse(body).id || typeof parsed.error?.code !== 'number') {
    throw new Error(`a random key was answered HTTP ${res.status}: ${res.body.slice(0, 300)}`);
  }
  return res.body;
}

const check = checkerFor();
const within = (v) => Math.abs(v - 1) <= TARGETS.spread;
const spreadTarget = `${(1 - TARGETS.spread).toFixed(2)}-${(1 + TARGETS.spread).toFixed(2)}`;

/** The section's targets: every judged kind against the random key, round by round (median of the rounds' ratios). */
export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  const ratio = (field) => (k, r) => k[field] / r[field];
  return KINDS.filter((k) => k.judged).flatMap(({ id: kind }) => [
    check(`req/s ${kind} / random key, median of the rounds`, [by[kind], by.random], ratio('rps'), spreadTarget, within),
    check(`p50 ${kind} / random key, median of the rounds`, [by[kind], by.random], ratio('p50Ms'), spreadTarget, within),
    check(
      `CPU per request ${kind} / random key, median of the rounds`,
      [by[kind], by.random],
      ratio('cpuUsPerRequest'),
      spreadTarget,
      within,
    ),
  ]);
}

/** Each slice of a kind (lib/slices.mjs), its wrk script starting at a random X-Forwarded-For address of its own. */
function measureKind({ gateway, upstream, body, expected }) {
  return (row, ctx, label) => {
    const answers = { body, status: 401, answer: expected, firstAddress: randomBytes(3).readUIntBE(0, 3), newKeyPerRequest: row.newKeys };
    const script = writeAnswerCheckScript(ctx.tmpdir, answers, `auth-refusals-${row.id}.lua`);
    return measure({
      id: row.id,
      label,
      url: row.url,
      pid: gateway.pid,
      upstreamPid: upstream.pid,
      ctx: { ...ctx, script },
      checkAnswer: row.checkAnswer,
      checkedScript: true,
    });
  };
}

/** Rounds run so far: each round's first turn starts at the next kind. */
let roundsRun = 0;

export async function run(ctx) {
  const { settings, body } = ctx;
  const cannotRun = (reason) => KINDS.map(({ id, label }) => notRun({ id, label, reason, error: true }));
  if (!chaingateMain()) return cannotRun('dist/main.js is missing: run npm run build');
  mkdirSync(ctx.tmpdir, { recursive: true });
  const firstTurn = roundsRun++;

  let upstream;
  try {
    upstream = await startFixedUpstream({ name: 'auth-refusals-upstream', core: settings.loadCore });
  } catch (err) {
    return cannotRun(`upstream did not start: ${err.message}`);
  }
  let gateway;
  try {
    // trust_proxy: each wrk request names its own client in X-Forwarded-For, so the unknown-key guard
    // (429 past 20 unknown keys a minute from one address) never answers in place of the 401.
    gateway = await startChaingate({
      name: 'chaingate-auth-refusals',
      dir: join(ctx.tmpdir, 'chaingate'),
      upstreamPort: upstream.port,
      chainId: FIXED_UPSTREAM_CHAIN_ID,
      core: settings.serverCore,
      keyed: true,
      trustProxy: true,
    });
  } catch (err) {
    await upstream.stop();
    return cannotRun(`did not start: ${err.message}`);
  }
  try {
    const base = `http://127.0.0.1:${gateway.port}/v1/rpc/`;
    const live = gateway.url.slice(base.length);
    const keys = {
      random: randomKey(),
      'random-again': randomKey(),
      'near-miss': `${live.slice(0, -1)}${live.endsWith('a') ? 'b' : 'a'}`,
      malformed: MALFORMED,
      missing: '',
    };
    let expected;
    try {
      const liveWrong = await checkJsonRpcResult(gateway.url, body);
      if (liveWrong) throw new Error(`the live key does not work: ${liveWrong}`);
      // Made, used once (so it was found and cached, as a key in use is), then deleted.
      const doomed = await createEndpoint(gateway.port, gateway.managementKey, 'deleted');
      const doomedWrong = await checkJsonRpcResult(doomed.url, body);
      if (doomedWrong) throw new Error(`the endpoint to delete does not work: ${doomedWrong}`);
      await deleteEndpoint(gateway.port, gateway.managementKey, doomed.id);
      keys.deleted = doomed.apiKey;
      expected = await referenceRefusal(base + keys.random, body);
    } catch (err) {
      return cannotRun(`preparing the keys: ${err.message}`);
    }

    const rows = KINDS.map(({ id, label }) => {
      const newKeys = id === 'new-random';
      // With a new key per request, wrk's script ends the key: the URL holds its first 27 characters.
      const url = base + (newKeys ? randomKey().slice(0, 27) : keys[id]);
      const sampleUrl = () => (newKeys ? base + randomKey() : url);
      return { id, label, url, newKeys, checkAnswer: () => wrongRefusal(sampleUrl(), body, expected) };
    });
    // The new keys go last, in slices of their own: thousands of keys remembered as missing, then
    // forgotten, leave garbage whose collection would fall on whichever kind followed them in a turn.
    const common = { measureSlice: measureKind({ gateway, upstream, body, expected }), ctx };
    const runs = new Map([
      ...(await measureInSlices({ ...common, rows: rows.filter((r) => !r.newKeys), firstTurn })),
      ...(await measureInSlices({ ...common, rows: rows.filter((r) => r.newKeys), firstTurn: 0 })),
    ]);
    return KINDS.map(({ id }) => runs.get(id));
  } finally {
    await gateway.stop();
    await upstream.stop();
  }
}
