// The gateway's API-key lookup alone, per kind of unknown key, without HTTP: the CPU time of
// Directory.endpointByKey (dist/tenancy/directory.js) on a real SQLite file. The auth-refusals section
// measures whole refusals, where a few tens of nanoseconds are lost in noise; this shows how far apart
// the kinds are where nothing else runs. Usage: `npm run build && taskset -c 0 node bench/key-lookups.mjs`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median } from './lib/checks.mjs';

const DIST = new URL('../dist/', import.meta.url);
const { openStore } = await import(new URL('store/open.js', DIST));
const { createDirectory } = await import(new URL('tenancy/directory.js', DIST));
const { createOwnerAdmin } = await import(new URL('tenancy/owners.js', DIST));
const { randomString } = await import(new URL('tenancy/keys.js', DIST));

/** Lookups per kind and round, and rounds; the kinds take turns, each round starting at the next. */
const KEYS = 10_000;
const ROUNDS = 15;

const dir = mkdtempSync(join(tmpdir(), 'chaingate-key-lookups-'));
const store = openStore(join(dir, 'keys.db'));
try {
  // KEYS endpoints deleted, KEYS live, as the management REST makes and deletes them.
  const maker = createDirectory(store);
  const { id: owner } = createOwnerAdmin(store).createOwner('bench', 'bench', 0);
  const made = Array.from({ length: 2 * KEYS }, () => maker.createEndpoint(owner, 'bench', undefined, Infinity));
  for (const r of made.slice(0, KEYS)) maker.deleteEndpoint(owner, r.endpoint.id);
  const deleted = made.slice(0, KEYS).map((r) => r.apiKey);
  const live = made.slice(KEYS).map((r) => r.apiKey);
  const nearMiss = (k) => `${k.slice(0, -1)}${k.endsWith('a') ? 'b' : 'a'}`;
  const cpuUs = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };

  const ns = new Map();
  for (let round = 0; round < ROUNDS; round++) {
    // A new directory has an empty memory of keys: every distinct key's first lookup reads SQLite.
    const directory = createDirectory(store);
    const kinds = [
      ['not seen: random, a new one each time', Array.from({ length: KEYS }, () => randomString(32))],
      ['not seen: deleted', deleted],
      ['not seen: near-miss', live.map(nearMiss)],
      ['repeated: random', Array(KEYS).fill(randomString(32))],
      ['repeated: deleted', Array(KEYS).fill(deleted[round])],
      ['repeated: near-miss', Array(KEYS).fill(nearMiss(live[round]))],
      ['repeated: malformed (not-a-key!)', Array(KEYS).fill('not-a-key!')],
      ['repeated: empty', Array(KEYS).fill('')],
      ['live keys, remembered (for scale)', live],
    ];
    const shift = round % kinds.length;
    for (const [name, keys] of [...kinds.slice(shift), ...kinds.slice(0, shift)]) {
      if (keys === live) for (const k of keys) directory.endpointByKey(k);
      const start = cpuUs();
      for (const k of keys) directory.endpointByKey(k);
      if (!ns.has(name)) ns.set(name, []);
      ns.get(name).push(((cpuUs() - start) * 1000) / keys.length);
    }
  }
  const width = Math.max(...[...ns.keys()].map((k) => k.length));
  process.stdout.write(`CPU per endpointByKey call, median of ${ROUNDS} rounds of ${KEYS.toLocaleString('en-US')} (min-max):\n`);
  for (const [name, values] of ns) {
    process.stdout.write(
      `  ${name.padEnd(width)}  ${Math.round(median(values)).toString().padStart(6)} ns  (${Math.round(Math.min(...values))}-${Math.round(Math.max(...values))})\n`,
    );
  }
} finally {
  store.close();
  rmSync(dir, { recursive: true, force: true });
}
