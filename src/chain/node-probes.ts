/**
 * How a chain's nodes are probed (upstreams/prober.ts runs the loops): the timings, and what one probe does (a
 * head read, beside the identity check when it is due).
 */
import type { ReadHead } from '../upstreams/head-probe.js';
import type { HttpUpstream } from '../upstreams/http-client.js';
import { startProber, type ProbeObserver, type Prober, type ProberOptions } from '../upstreams/prober.js';
import type { ChainHealth } from '../upstreams/selection.js';
import type { ChainIdentity } from './chain-identity.js';

/**
 * How the chain's prober runs (see prober.ts): heads of nodes in rotation are polled every second, so lag is
 * judged on heads about a second old, and a node that stops answering while no call reaches it is out after
 * three refused polls (about 3 s) or one poll given up on (within 3.5 s when it hangs: a poll starts within
 * 1 s, is suspected 1 s later and given up 2.5 s after it started); nodes out of rotation are probed every
 * 1.5 s, so one that recovers is back within 1.5 s plus its answer (2.5 + 1.5 s when a probe of it was
 * hanging). The prober keeps two probes of a node intervalMs / 2 apart, which must stay under headIntervalMs
 * or timer jitter skips polls.
 */
const PROBER_DEFAULTS: Required<Omit<ProberOptions, 'timers' | 'observer'>> = {
  intervalMs: 1_500,
  headIntervalMs: 1_000,
  probeTimeoutMs: 2_500,
};

/**
 * A probe's own request timeout sits this far past the prober's deadline, in ms, so the prober gives a hanging
 * probe up first and counts it as a hang. With the two equal the request's timeout won, the hang counted as an
 * ordinary failure, and three were needed: a hanging node stayed in rotation about 9 s.
 */
const PROBE_REQUEST_SLACK_MS = 1_000;

/** The prober's options: PROBER_DEFAULTS under the chain's overrides, each probe told to `observer` when given. */
export function proberOptionsOf(overrides: ProberOptions | undefined, observer: ProbeObserver | undefined): ProberOptions {
  return {
    ...PROBER_DEFAULTS,
    ...overrides,
    ...(observer !== undefined ? { observer } : {}),
  };
}

/** Starts probing the chain's nodes; stop() on the answer ends it. */
export function startNodeProbes(
  health: ChainHealth,
  identity: ChainIdentity,
  upstreams: readonly HttpUpstream[],
  readHead: ReadHead,
  proberOptions: ProberOptions,
): Prober {
  const probeTimeoutMs = proberOptions.probeTimeoutMs ?? PROBER_DEFAULTS.probeTimeoutMs;
  const requestTimeoutMs = probeTimeoutMs + PROBE_REQUEST_SLACK_MS;
  // What a node serves is checked, when due, beside its head read and under a timeout of its own, so a slow
  // node's check never makes its probe late (chain-identity.ts). A failing node's head restores it only once
  // a check since it failed has answered: one back from failing on another chain is judged first.
  return startProber(
    health,
    async (index, signal) => {
      if (identity.due(index)) void identity.check(index);
      const head = await readHead(upstreams[index]!, requestTimeoutMs, signal);
      await identity.admit(index, signal);
      return head;
    },
    proberOptions,
  );
}
