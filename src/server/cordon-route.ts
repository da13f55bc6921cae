/**
 * POST /upstreams/cordon and POST /upstreams/uncordon on the metrics listener (behind its token, as /status is):
 * `?chain=SLUG&node=NAME` takes node NAME of chain SLUG out of rotation for maintenance, or lets it back, without
 * a reload (`chaingate upstream cordon|uncordon` calls it). The set changed is the main thread's (chain/cordons.ts),
 * which every worker thread follows; the chain's open subscriptions move off a cordoned node as off a failed one.
 */
import type { ChainConfig } from '../config/schema.js';
import type { Cordons } from '../chain/cordons.js';
import type { Logger } from '../log.js';

/** The answer to a cordon request: its status and its JSON body. */
export interface CordonReply {
  status: number;
  body: string;
}

/** What the route reads: the chains in force, the thread's cordoned set, and where a change is logged. */
export interface CordonDeps {
  chains: () => ReadonlyMap<string, { config: ChainConfig }>;
  cordons: Cordons;
  log: Logger;
}

const reply = (status: number, body: object): CordonReply => ({ status, body: JSON.stringify(body) });

/** Cordons (`cordoned` true) or uncordons the node the query names; a refusal names what was refused. */
export function cordonRequest(deps: CordonDeps, query: string, cordoned: boolean): CordonReply {
  const q = new URLSearchParams(query);
  const chain = q.get('chain') ?? '';
  const node = q.get('node') ?? '';
  if (chain === '' || node === '') return reply(400, { error: 'needs ?chain=SLUG&node=NAME (the upstream name status shows)' });
  const runtime = deps.chains().get(chain);
  if (runtime === undefined) return reply(404, { error: `no chain '${chain}' is configured` });
  const names = runtime.config.upstreams.map((u) => u.name);
  if (!names.includes(node))
    return reply(404, { error: `chain '${chain}' has no upstream named '${node}'; its upstreams: ${names.join(', ')}` });
  // Logged before the change, which logs the node leaving or joining rotation.
  const changed = deps.cordons.has(chain, node) !== cordoned;
  if (changed) deps.log.warn(cordoned ? 'upstream cordoned' : 'upstream uncordoned', { chain, upstream: node });
  deps.cordons.set(chain, node, cordoned);
  return reply(200, { chain, node, cordoned, changed });
}
