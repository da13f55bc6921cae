/**
 * `chaingate upstream cordon|uncordon CHAIN NODE --config FILE`: asks the running daemon, through its metrics
 * listener (host, port and token of the config's `metrics` section, as `chaingate status` does), to take node
 * NODE of chain CHAIN out of rotation for maintenance, or to let it back (server/cordon-route.ts). Exit 0 when
 * done (or already so), 1 when the daemon refused (no such chain or node), 2 when it cannot be asked.
 */
import type { Config } from '../config/schema.js';
import { daemonUrl } from './status.js';

/** How long the daemon gets to answer, in ms. */
const ASK_TIMEOUT_MS = 5_000;

/** Exit statuses; 2 is both a wrong command line (as for every command) and a daemon that cannot be asked. */
export const UPSTREAM_EXIT = { done: 0, refused: 1, unreachable: 2, badArguments: 2 } as const;

/** What the command asks: its word and the node, as the command line (main.ts) read and checked them. */
export interface UpstreamTarget {
  action: 'cordon' | 'uncordon';
  chain: string;
  node: string;
}

/** Runs the command; resolves with its exit code. */
export async function runUpstream(
  config: Config,
  configPath: string,
  { action, chain, node }: UpstreamTarget,
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const m = config.metrics;
  if (m === undefined) {
    err(`chaingate upstream: ${configPath} turns the metrics listener off (metrics.enabled: false), and cordons go through it\n`);
    return UPSTREAM_EXIT.unreachable;
  }
  const url = daemonUrl(m, `/upstreams/${action}?${new URLSearchParams({ chain, node }).toString()}`);
  try {
    const res = await fetch(url, {
      method: 'POST',
      signal: AbortSignal.timeout(ASK_TIMEOUT_MS),
      ...(m.token !== undefined ? { headers: { authorization: `Bearer ${m.token}` } } : {}),
    });
    const text = (await res.text()).trim();
    if (res.status !== 200) {
      const why = (JSON.parse(text || '{}') as { error?: string }).error ?? text;
      err(`chaingate upstream ${action}: the daemon answered ${res.status}: ${why}\n`);
      return res.status === 400 || res.status === 404 ? UPSTREAM_EXIT.refused : UPSTREAM_EXIT.unreachable;
    }
    const r = JSON.parse(text) as { changed: boolean };
    const state = action === 'cordon' ? 'cordoned (out of rotation)' : 'uncordoned (back in rotation when healthy)';
    out(`${chain} ${node}: ${r.changed ? state : `already ${state}`}\n`);
    return UPSTREAM_EXIT.done;
  } catch (e) {
    const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name;
    err(
      `chaingate upstream ${action}: cannot reach the daemon at ${daemonUrl(m, '')} (${cause}): is chaingate running with ${configPath}?\n`,
    );
    return UPSTREAM_EXIT.unreachable;
  }
}
