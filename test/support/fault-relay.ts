/**
 * A relay in front of a real node that misbehaves on a seeded draw (test/support/seeded.ts), so a run can be
 * replayed: it holds back a share of the calls of some methods (a node slow beyond its p90), and answers HTTP 500
 * to a share of others (a node failing 30% of calls). Built on countingProxy, whose record of calls it keeps.
 */
import type { Test } from 'tap';
import { type CountingProxy, countingProxy, type SeenCall } from './counting-proxy.js';
import { seeded } from './seeded.js';

export interface FaultPlan {
  seed: number;
  /** Calls of a rule's methods held back `ms` when the draw is below `share` (`share` 1: every one). */
  slow?: ReadonlyArray<{ methods: readonly string[]; share: number; ms: number }>;
  /** Calls of these methods answered HTTP 500 when the draw is below `share`. */
  fail?: { methods: readonly string[]; share: number };
}

export interface FaultRelay extends CountingProxy {
  /** Calls held back and calls failed so far. */
  readonly slowed: SeenCall[];
  readonly failed: SeenCall[];
}

export async function faultRelay(t: Test, upstreamUrl: string, plan: FaultPlan): Promise<FaultRelay> {
  const proxy = await countingProxy(t, upstreamUrl);
  const draw = seeded(plan.seed);
  const slowed: SeenCall[] = [];
  const failed: SeenCall[] = [];
  const { slow, fail } = plan;
  if (slow !== undefined)
    proxy.delay((call) => {
      const rule = slow.find((r) => r.methods.includes(call.method));
      if (rule === undefined || draw() >= rule.share) return undefined;
      slowed.push(call);
      return rule.ms;
    });
  if (fail !== undefined)
    proxy.fail((call) => {
      if (!fail.methods.includes(call.method) || draw() >= fail.share) return false;
      failed.push(call);
      return true;
    });
  return Object.assign(proxy, { slowed, failed });
}
