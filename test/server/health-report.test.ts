import t from 'tap';
import { healthz, readyz, type ChainHealthEntry } from '../../src/server/health-report.js';
import { createServedHead, type ServedHead } from '../../src/chain/served-head.js';
import { type ChainHealth, type ChainHealthOptions, createChainHealth } from '../../src/upstreams/selection.js';

/** A chain's health with its served head, worked out on each report as a runtime does. */
function withServed(labels: string[], opts: ChainHealthOptions): { health: ChainHealth; served: ServedHead } {
  let served: ReturnType<typeof createServedHead> | null = null;
  const health = createChainHealth(labels, { ...opts, onHeads: () => served?.update() });
  served = createServedHead(health);
  return { health, served };
}

function chains(): { entries: ChainHealthEntry[]; advance(ms: number): void } {
  let now = 0;
  const clock = () => now;
  const mainnet = withServed(['https://a.example:8545', 'https://b.example:8545', 'http://10.0.0.3:8545'], {
    maxLagBlocks: 5,
    now: clock,
  });
  const sepolia = withServed(['http://10.0.1.1:8545'], { maxLagBlocks: 2, now: clock });
  return {
    entries: [
      {
        slug: 'mainnet',
        ...mainnet,
        finality: {
          finalized: () => ({ number: 21_480_048, hash: `0x${'aa'.repeat(32)}` }),
          safe: () => ({ number: 21_480_080, hash: `0x${'bb'.repeat(32)}` }),
        },
      },
      { slug: 'sepolia', ...sepolia },
    ],
    advance: (ms) => {
      now += ms;
    },
  };
}

t.test('everything fresh: live and ready, with each upstream listed', async (t) => {
  const { entries } = chains();
  const live = healthz(entries, 12_345);
  t.equal(live.status, 200);
  const body = JSON.parse(live.body);
  t.equal(body.status, 'live');
  t.equal(body.uptime_s, 12);
  t.same(Object.keys(body.chains), ['mainnet', 'sepolia']);
  t.match(body.chains.mainnet, { finalized_block: 21_480_048, safe_block: 21_480_080 }, 'the block numbers finality holds');
  t.same(body.chains.sepolia, {
    ready: true,
    best_head: null,
    served_head: null,
    finalized_block: null,
    safe_block: null,
    max_lag_blocks: 2,
    upstreams: [
      {
        label: 'http://10.0.1.1:8545',
        in_rotation: true,
        reason: null,
        head: null,
        lag: null,
        error_rate: 0,
        calls: 0,
        p50_ms: null,
        inflight: 0,
      },
    ],
  });

  const ready = readyz(entries);
  t.equal(ready.status, 200);
  const r = JSON.parse(ready.body);
  t.equal(r.status, 'ready');
  t.same(r.not_ready, []);
  t.same(r.chains, body.chains, 'the same detail in both');
});

t.test('detail: heads, lag, error rate and p50; a lagging and a failing node out with their reason', async (t) => {
  const { entries } = chains();
  const [a, b, c] = entries[0]!.health.upstreams;
  a!.reportHead(1000);
  b!.reportHead(994);
  c!.reportHead(2000);
  for (const ms of [10, 12, 14]) a!.record('ok', ms);
  a!.record('failed', 5);
  for (let k = 0; k < 3; k++) c!.record('failed', 1);
  a!.inflight = 2;

  const body = JSON.parse(healthz(entries, 0).body);
  const mainnet = body.chains.mainnet;
  t.equal(mainnet.ready, true);
  t.equal(mainnet.best_head, 1000, "the failing node's higher head does not count");
  t.equal(mainnet.served_head, 1000, 'served: the only node in rotation left is below 2000, so the head follows it down');
  const [ra, rb, rc] = mainnet.upstreams;
  t.match(ra, {
    label: 'https://a.example:8545',
    in_rotation: true,
    reason: null,
    head: 1000,
    lag: 0,
    error_rate: 0.25,
    calls: 4,
    inflight: 2,
  });
  t.ok(Math.abs(ra.p50_ms - 12) <= 0.6, `p50 ${ra.p50_ms}`);
  t.equal(ra.p50_ms, Math.round(ra.p50_ms * 10) / 10, 'p50 to a tenth of a ms');
  t.match(rb, { in_rotation: false, reason: 'lagging', head: 994, lag: 6 });
  t.match(rc, { in_rotation: false, reason: 'failing', head: 2000, lag: 0, error_rate: 1, calls: 3 });
  c!.record('ok', 1);
  c!.record('failed', 1);
  c!.record('failed', 1);
  t.equal(JSON.parse(healthz(entries, 0).body).chains.mainnet.upstreams[2].error_rate, 0.833, '5 of 6, three decimals');
});

t.test('a chain with no upstream in rotation: not ready (503) but still live (200)', async (t) => {
  const { entries, advance } = chains();
  const only = entries[1]!.health.upstreams[0]!;
  for (let k = 0; k < 3; k++) only.record('failed', 30_000);
  const ready = readyz(entries);
  t.equal(ready.status, 503);
  const r = JSON.parse(ready.body);
  t.equal(r.status, 'not ready');
  t.same(r.not_ready, ['sepolia']);
  t.equal(r.chains.mainnet.ready, true);
  t.equal(r.chains.sepolia.ready, false);
  t.match(r.chains.sepolia.upstreams[0], { in_rotation: false, reason: 'failing', calls: 3, error_rate: 1 });

  t.equal(healthz(entries, 1_000).status, 200);

  advance(60_000);
  t.equal(readyz(entries).status, 503, 'time alone does not restore it');
  only.reportProbe(77, 4);
  t.equal(readyz(entries).status, 200, 'a good probe does');
});

t.test('labels are shown as given; no chains at all is live and ready', async (t) => {
  const body = readyz([{ slug: 'main', ...withServed(['https://rpc.example:443'], { maxLagBlocks: 5 }) }]).body;
  t.match(body, /"label":"https:\/\/rpc\.example:443"/);
  t.equal(healthz([], 0).status, 200);
  t.same(JSON.parse(readyz([]).body), { status: 'ready', not_ready: [], chains: {} });
});
