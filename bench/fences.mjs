// Section: what an endpoint's restrictions (src/fences/) cost a whole forwarded call (issue 31: with 20
// origins, 50 CIDRs and 200 contract addresses set, at most 3 % more CPU per call than without). Two keyed,
// metered gateways in front of one fixed upstream, measured back to back in every round, taking turns at
// going first: one whose endpoint has no restrictions, one whose endpoint has all three lists set with the
// operator's `chaingate endpoint set`. Both have `fences.contracts_cover_balance: true`, so the load's
// eth_getBalance is checked against the contract list, and both get the same requests (the same Origin
// header): only the endpoint's settings differ. See bench/README.md (fences).
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startChaingate } from './lib/chaingate.mjs';
import { addressReadUs } from './lib/address-read.mjs';
import { checkerFor } from './lib/checks.mjs';
import { forwardedBodies } from './lib/forwarded-calls.mjs';
import { measure, notRun } from './lib/measure.mjs';
import { cpuProfArgs, stopGraceMs } from './lib/profiles.mjs';
import { checkJsonRpcResult, postJson } from './lib/net.mjs';
import { inTurn } from './lib/rounds.mjs';
import { FIXED_UPSTREAM_CHAIN_ID, startFixedUpstream } from './lib/upstreams.mjs';
import { writePostScript } from './lib/wrk.mjs';

export const id = 'fences';
export const title = 'Endpoint restrictions: keyed, metered eth_getBalance with and without them (fixed upstream)';
/** Tools this section cannot run without (run.mjs skips it when one is missing). */
export const needs = ['wrk'];

const TARGETS = {
  cpu: 1.03, // CPU per call restricted / unrestricted at most (issue 31, "Done when")
};

/** Figures kept for each round of a merged run, which the checks pair round by round (lib/rounds.mjs). */
const ROUND_FIELDS = ['cpuUsPerRequest', 'addressReadUs'];

const CONTRACTS = 200;
const hex = (i, width) => i.toString(16).padStart(width, '0');

/** 20 origins, exact and wildcard; every request's Origin is the last (the exact ones are a set, wildcards scanned). */
const ORIGINS = [
  ...Array.from({ length: 5 }, (_, i) => `*.dapp${i}.io`),
  ...Array.from({ length: 15 }, (_, i) => `https://app${i}.example${i}.com`),
];
const ORIGIN = 'https://app14.example14.com';

/**
 * 50 ranges: 10 IPv6, then 40 IPv4, 127.0.0.0/24 (wrk's address) the last, as the IPv4 ranges are scanned
 * in order.
 */
const CIDRS = [
  ...Array.from({ length: 10 }, (_, i) => `2001:db8:${hex(i, 4)}::/48`),
  ...Array.from({ length: 39 }, (_, i) => `10.${i}.0.0/16`),
  '127.0.0.0/24',
];

/**
 * 200 addresses: the load's (one per request body, distinct so that calls in flight are not shared) last,
 * after others that no request names. Null when the load names more than 200.
 */
function contractList(bodies) {
  const named = bodies.map((b) => JSON.parse(b).params[0]);
  if (named.length > CONTRACTS) return null;
  const others = Array.from({ length: CONTRACTS - named.length }, (_, i) => `0x${'c'.repeat(32)}${hex(i, 8)}`);
  return [...others, ...named];
}

/** The restricted endpoint's settings, as an operator sets them: `chaingate endpoint set ID --flags`. */
function restrict(gateway, contracts, ips) {
  execFileSync(
    process.execPath,
    [
      gateway.main,
      'endpoint',
      'set',
      gateway.endpointId,
      '--allowed-origins',
      ORIGINS.join(','),
      ...(ips ? ['--allowed-ips', CIDRS.join(',')] : []),
      '--allowed-contracts',
      contracts.join(','),
      '--json',
      '--config',
      gateway.config,
    ],
    { encoding: 'utf8' },
  );
}

/**
 * Null once the restricted endpoint refuses, with a 403, an Origin outside its list and an address outside
 * its contracts (the settings reach the gateway from the store: waited for up to 10 s), else what came back.
 */
async function notRefusing(url, body) {
  const outside = JSON.stringify({ ...JSON.parse(body), params: [`0x${'d'.repeat(40)}`, 'latest'] });
  const probes = [
    { what: 'an Origin outside the list', body, headers: { origin: 'https://elsewhere.example' } },
    { what: 'an address outside the contracts', body: outside, headers: { origin: ORIGIN } },
  ];
  const deadline = Date.now() + 10_000;
  for (;;) {
    let wrong = null;
    for (const p of probes) {
      const res = await postJson(url, p.body, 5_000, p.headers).catch((err) => ({ status: 0, body: err.message }));
      if (res.status !== 403) wrong ??= `${p.what} was answered HTTP ${res.status}: ${res.body.slice(0, 200)}`;
    }
    if (wrong === null || Date.now() > deadline) return wrong;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function measureGateway({ id, label, fenced, ips = true, contracts, upstream, ctx }) {
  let gateway;
  try {
    gateway = await startChaingate({
      name: `chaingate-${id}`,
      dir: join(ctx.tmpdir, id),
      upstreamPort: upstream.port,
      chainId: FIXED_UPSTREAM_CHAIN_ID,
      core: ctx.settings.serverCore,
      keyed: true,
      // Metrics on, as by default, on a port of their own: 9464 may be another bench's on a shared machine.
      extraYaml: 'fences: { contracts_cover_balance: true }\nmetrics: { port: 0 }\n',
      nodeArgs: cpuProfArgs(ctx, id),
    });
  } catch (err) {
    return notRun({ id, label, reason: `did not start: ${err.message}`, error: true });
  }
  try {
    if (fenced) {
      try {
        restrict(gateway, contracts, ips);
      } catch (err) {
        return notRun({ id, label, reason: `endpoint set failed: ${err.stderr ?? err.message}`, error: true });
      }
      const wrong = await notRefusing(gateway.url, ctx.body);
      if (wrong) return notRun({ id, label, reason: `its restrictions are not applied: ${wrong}`, error: true });
    }
    const checkAnswer = () => checkJsonRpcResult(gateway.url, ctx.body, { origin: ORIGIN });
    const run = await measure({ id, label, url: gateway.url, pid: gateway.pid, upstreamPid: upstream.pid, checkAnswer, ctx });
    return { ...run, roundFields: ROUND_FIELDS };
  } finally {
    await gateway.stop(stopGraceMs(ctx));
  }
}

export async function run(sectionCtx) {
  mkdirSync(sectionCtx.tmpdir, { recursive: true });
  const bodies = forwardedBodies(sectionCtx.settings.connections);
  const script = writePostScript(sectionCtx.tmpdir, bodies, 'fences.lua', { Origin: ORIGIN });
  const ctx = { ...sectionCtx, body: bodies[0], script };
  const rows = [
    { id: 'open', label: 'chaingate (API key, metered), no restrictions → fixed upstream', fenced: false },
    {
      id: 'fenced',
      label: `chaingate (API key, metered), ${ORIGINS.length} origins, ${CIDRS.length} CIDRs, ${CONTRACTS} contracts → fixed upstream`,
      fenced: true,
    },
    {
      // The same without the address list: a keyed request otherwise never reads the peer's address, and
      // uWS's getRemoteAddress() costs about a microsecond a call (a new ArrayBuffer each time).
      id: 'fenced-no-ips',
      label: `chaingate (API key, metered), ${ORIGINS.length} origins, ${CONTRACTS} contracts, no address list → fixed upstream`,
      fenced: true,
      ips: false,
    },
  ];
  const contracts = contractList(bodies);
  if (!contracts) {
    const reason = `the load names ${bodies.length} addresses, more than the ${CONTRACTS} contracts: lower BENCH_CONNECTIONS`;
    return rows.map(({ id, label }) => notRun({ id, label, reason, error: true }));
  }
  let upstream;
  try {
    upstream = await startFixedUpstream({ name: 'fences-upstream', core: ctx.settings.loadCore });
  } catch (err) {
    return rows.map(({ id, label }) => notRun({ id, label, reason: `upstream did not start: ${err.message}`, error: true }));
  }
  const runs = [];
  try {
    // The two take turns at going first, round by round (lib/rounds.mjs); the table lists them in order.
    for (const row of inTurn(rows, ctx.round)) runs.push(await measureGateway({ ...row, contracts, upstream, ctx }));
  } finally {
    await upstream.stop();
  }
  // Kept with the unrestricted row, so each round has its own reading.
  const open = runs.find((x) => x.id === 'open');
  if (open && !open.skipped) open.addressReadUs = await addressReadUs().catch(() => null);
  return rows.map((r) => runs.find((x) => x.id === r.id));
}

const check = checkerFor();

export function checks(runs) {
  const by = Object.fromEntries(runs.map((r) => [r.id, r]));
  return [
    check(
      'CPU per call restricted / unrestricted, fixed upstream',
      [by.fenced, by.open],
      (f, o) => f.cpuUsPerRequest / o.cpuUsPerRequest,
      `≤ ${TARGETS.cpu}`,
      (v) => v <= TARGETS.cpu,
    ),
    check('req/s restricted / unrestricted, fixed upstream', [by.fenced, by.open], (f, o) => f.rps / o.rps, 'reported'),
    check(
      'CPU per call restricted without the address list / unrestricted, fixed upstream',
      [by['fenced-no-ips'], by.open],
      (f, o) => f.cpuUsPerRequest / o.cpuUsPerRequest,
      `≤ ${TARGETS.cpu}`,
      (v) => v <= TARGETS.cpu,
    ),
    check('µs per call of uWS getRemoteAddress(), in process', [by.open], (o) => o.addressReadUs, 'reported'),
  ];
}
