// An endpoint's restrictions (src/fences/) alone, without HTTP: the CPU time of one call's checks with
// 20 origins, 50 CIDR ranges and 200 contract addresses set, against the same checks on an endpoint with
// none, in nanoseconds per call, and the difference as a share of a whole call's CPU (issue 31: at most
// 3 % more per call). Usage: `npm run build && taskset -c 0 node bench/fence-checks.mjs`;
// BENCH_CALL_US is a call's CPU through the gateway in µs (default 62, bench/RESULTS.md's shared-limits
// figure), BENCH_ITERATIONS the calls per round (default 1,000,000).
import { median } from './lib/checks.mjs';

const DIST = new URL('../dist/', import.meta.url);
const { compileFences, refuseCall, refuseRequest, refuseToken } = await import(new URL('fences/fences.js', DIST));
const { applyFencePatch, NO_FENCES } = await import(new URL('fences/settings.js', DIST));
const { exportJWK, generateKeyPair, SignJWT } = await import('jose');

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 1_000_000);
const ROUNDS = 7;
const CALL_US = Number(process.env.BENCH_CALL_US ?? 62);

const hex = (i, width) => i.toString(16).padStart(width, '0');
const origins = [
  ...Array.from({ length: 15 }, (_, i) => `https://app${i}.example${i}.com`),
  ...Array.from({ length: 5 }, (_, i) => `*.dapp${i}.io`),
];
const cidrs = [
  ...Array.from({ length: 40 }, (_, i) => `10.${i}.0.0/16`),
  ...Array.from({ length: 10 }, (_, i) => `2001:db8:${hex(i, 4)}::/48`),
];
const contracts = Array.from({ length: 200 }, (_, i) => `0x${hex(i + 1, 40)}`);

const read = applyFencePatch(NO_FENCES, {
  allowed_origins: origins,
  allowed_ips: cidrs,
  allowed_contracts: contracts,
});
if (!read.ok) throw new Error(JSON.stringify(read.problems));
const restricted = compileFences(read.settings);
const open = compileFences(NO_FENCES);

// The same endpoint requiring a signed token too: a token seen before is answered from the cache.
const { privateKey, publicKey } = await generateKeyPair('ES256');
const withToken = applyFencePatch(read.settings, { jwt_keys: [{ id: 'k', alg: 'ES256', jwk: await exportJWK(publicKey) }] });
if (!withToken.ok) throw new Error(JSON.stringify(withToken.problems));
const tokened = compileFences(withToken.settings);
const nowS = Math.floor(Date.now() / 1000);
const jwt = await new SignJWT({})
  .setProtectedHeader({ alg: 'ES256', kid: 'k' })
  .setIssuedAt(nowS)
  .setExpirationTime(nowS + 3000)
  .sign(privateKey);
if ((await refuseToken(tokened, jwt)) !== undefined) throw new Error('the bench token is refused');

// A browser's call as the checks see it: the last exact origin, an address in the last IPv4 range (the
// ranges are scanned in order), eth_call to an allowed contract in mixed case (lower-cased per call).
const contract = contracts[199].replace(/a/g, 'A');
const cases = {
  'eth_call, exact origin, IPv4 text': {
    facts: { origin: 'https://app14.example14.com', ip: '10.39.1.2', keyPlace: 'path' },
    method: 'eth_call',
    params: [{ to: contract, data: '0x70a08231' }, 'latest'],
  },
  'eth_getLogs of 3 contracts, wildcard origin, IPv4 bytes': {
    facts: { origin: 'https://www.dapp4.io', ip: Uint8Array.from([10, 39, 1, 2]), keyPlace: 'path' },
    method: 'eth_getLogs',
    params: [{ address: [contracts[0], contracts[100], contracts[199]], fromBlock: '0x1', toBlock: '0x2' }],
  },
  'eth_blockNumber, exact origin, IPv6 text': {
    facts: { origin: 'https://app0.example0.com', ip: '2001:db8:9::1', keyPlace: 'path' },
    method: 'eth_blockNumber',
    params: [],
  },
};

/**
 * CPU ns per call of one call's checks on `fences`, over ITERATIONS calls: the process's CPU time, not the
 * wall clock, so the time slices other processes of a busy machine take do not count.
 */
function timeChecks(fences, c, token = undefined) {
  let refused = 0;
  const started = process.cpuUsage();
  for (let i = 0; i < ITERATIONS; i++) {
    if (refuseRequest(fences, c.facts) !== undefined) refused++;
    if (refuseToken(fences, token) !== undefined) refused++;
    if (refuseCall(fences, c.method, c.params) !== undefined) refused++;
  }
  const used = process.cpuUsage(started);
  const ns = ((used.user + used.system) * 1000) / ITERATIONS;
  if (refused !== 0) throw new Error('a call the bench expects allowed was refused');
  return ns;
}

const rows = [];
for (const [name, c] of Object.entries(cases)) {
  const none = [];
  const set = [];
  // Warm both before measuring, then alternate so drift on a shared machine falls on both sides.
  timeChecks(open, c);
  timeChecks(restricted, c);
  for (let r = 0; r < ROUNDS; r++) {
    none.push(timeChecks(open, c));
    set.push(timeChecks(restricted, c));
  }
  const extra = median(set) - median(none);
  rows.push({ name, none: median(none), set: median(set), extra, share: (extra / (CALL_US * 1000)) * 100 });
}
{
  const c = cases['eth_call, exact origin, IPv4 text'];
  const none = [];
  const set = [];
  timeChecks(tokened, c, jwt);
  for (let r = 0; r < ROUNDS; r++) {
    none.push(timeChecks(open, c));
    set.push(timeChecks(tokened, c, jwt));
  }
  const extra = median(set) - median(none);
  rows.push({
    name: 'the same with a signed token (seen before)',
    none: median(none),
    set: median(set),
    extra,
    share: (extra / (CALL_US * 1000)) * 100,
  });
}

console.log(`fence checks per call: medians of ${ROUNDS} rounds of ${ITERATIONS.toLocaleString('en')} calls`);
console.log('| call | none ns | 20 origins, 50 CIDRs, 200 contracts ns | more ns | share of a call (' + CALL_US + ' µs) |');
console.log('|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.name} | ${r.none.toFixed(1)} | ${r.set.toFixed(1)} | ${r.extra.toFixed(1)} | ${r.share.toFixed(2)} % |`);
}
