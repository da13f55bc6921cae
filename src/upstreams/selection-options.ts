/**
 * What a chain's node choice (selection.ts) is told at its making: its rules (lag, breaker, tiers, budgets), its
 * clock and random source, and whom to tell of rotation, head and cooldown changes.
 */
import type { ChainMetrics } from '../metrics/registry.js';
import type { BreakerPolicy, OutOfRotationReason } from './health.js';
import type { BudgetLimits } from './node-budget.js';

export interface ChainHealthOptions {
  /** Blocks a node may be behind the best head and stay in rotation (config chains.<slug>.max_lag_blocks). */
  maxLagBlocks: number;
  /** Monotonic ms; default performance.now. */
  now?: () => number;
  /** Each node's breaker (config chains.<slug>.failover.breaker); default health.ts's BUILT_IN_BREAKER. */
  breaker?: BreakerPolicy;
  /** Uniform in [0, 1); default Math.random. */
  random?: () => number;
  /** Where a node's head going back more than DEEPEST_REORG is logged (a warn per event). Default: nowhere. */
  log?: (level: 'info' | 'warn', msg: string, fields?: Record<string, string | number>) => void;
  /** How metrics and logs name each upstream (its configured `name`; indices match the labels); default the labels. */
  names?: readonly string[];
  /** The chain's metrics: each upstream's rotation and head, and the chain's best head, are kept in them. */
  metrics?: ChainMetrics;
  /** An upstream went out of rotation (`reason` failing or lagging) or back in, once per change. */
  onRotation?(name: string, inRotation: boolean, reason: OutOfRotationReason | 'recovered'): void;
  /** Blocks below the best head taken as final (config chains.<slug>.finality_depth), for onFinalUndone. */
  finalityDepth?: number;
  /** The best head went back more than finalityDepth below the highest it had since the last call. */
  onFinalUndone?(from: number, to: number): void;
  /** After every head report and every rotation change, once rotation is judged again: the chain works its
   *  served head out from here (chain/served-head.ts). */
  onHeads?(): void;
  /** Each upstream's tier (indices match the labels; config upstreams[].tier); default all 0. */
  tiers?: readonly number[];
  /** Each upstream's limits in this thread (indices match the labels); default none. */
  budgets?: readonly BudgetLimits[];
  /** Node `name` answered 429 and gets no call for `ms`: once per cooldown. */
  onCooldown?(name: string, ms: number): void;
}
