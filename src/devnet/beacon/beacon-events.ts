/**
 * `/eth/v1/events`: Server-Sent Events for the followed chain. Each new slot sends `block` then
 * `head`; `finalized_checkpoint` follows when the finalized epoch advances; `chain_reorg` when anvil's
 * chain leaves the cached head. Other topics of the API are accepted and stay silent. Idle streams
 * get a `:` comment every 10 s so proxies keep them open.
 */
import type { ServerResponse } from 'node:http';
import type { BeaconContext } from './beacon-ids.js';
import { found, listParam, missing, type Found } from './beacon-reply.js';
import type { ChainChange, SlotBlock } from './chain-view.js';
import { ZERO_ROOT } from './deterministic.js';

export const KNOWN_TOPICS: readonly string[] = [
  'head',
  'block',
  'block_gossip',
  'attestation',
  'single_attestation',
  'voluntary_exit',
  'bls_to_execution_change',
  'proposer_slashing',
  'attester_slashing',
  'finalized_checkpoint',
  'chain_reorg',
  'contribution_and_proof',
  'light_client_finality_update',
  'light_client_optimistic_update',
  'payload_attributes',
  'blob_sidecar',
  'data_column_sidecar',
];

const KEEPALIVE_MS = 10_000;
/** A stream whose client reads slower than this many unsent bytes is closed rather than buffered without end. */
const MAX_BUFFERED_BYTES = 1 << 20;

/** `topics=head,block` and `topics=head&topics=block` alike; none or an unknown one is 400. */
export function parseTopics(query: URLSearchParams): Found<string[]> {
  const topics = [...new Set(listParam(query, 'topics'))];
  if (topics.length === 0) return missing(400, 'topics is required');
  const unknown = topics.find((t) => !KNOWN_TOPICS.includes(t));
  return unknown === undefined ? found(topics) : missing(400, `invalid topic: ${unknown}`);
}

export interface EventHub {
  /** Starts streaming to `res` (headers already chosen here); the stream ends when the client goes or the hub closes. */
  add(res: ServerResponse, topics: readonly string[]): void;
  /** Ends every stream and stops listening to the chain. */
  close(): void;
}

export function createEventHub(ctx: BeaconContext): EventHub {
  const { view, epochs } = ctx;
  const clients = new Map<ServerResponse, { topics: ReadonlySet<string>; keepalive: NodeJS.Timeout }>();
  let finalizedEpoch = epochs.finalizedEpoch(view.head().slot);

  function send(topic: string, data: Record<string, unknown>): void {
    const frame = `event: ${topic}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const [res, { topics }] of clients) {
      if (!topics.has(topic)) continue;
      if (res.writableLength > MAX_BUFFERED_BYTES) res.destroy();
      else res.write(frame);
    }
  }

  const rootAt = (slot: number): string => view.cached(slot)?.root ?? ZERO_ROOT;

  function onBlock(b: SlotBlock): void {
    const epoch = epochs.epochOf(b.slot);
    send('block', { slot: String(b.slot), block: b.root, execution_optimistic: false });
    send('head', {
      slot: String(b.slot),
      block: b.root,
      state: b.stateRoot,
      epoch_transition: b.slot % epochs.slotsPerEpoch === 0,
      previous_duty_dependent_root: rootAt(epochs.dependentSlot(epoch, 1)),
      current_duty_dependent_root: rootAt(epochs.dependentSlot(epoch, 0)),
      execution_optimistic: false,
    });
    const fe = epochs.finalizedEpoch(b.slot);
    if (fe > finalizedEpoch) {
      finalizedEpoch = fe;
      const cp = view.cached(epochs.startSlot(fe));
      send('finalized_checkpoint', {
        block: cp?.root ?? ZERO_ROOT,
        state: cp?.stateRoot ?? ZERO_ROOT,
        epoch: String(fe),
        execution_optimistic: false,
      });
    }
  }

  function onChange(change: ChainChange): void {
    if (change.kind === 'block') return onBlock(change.block);
    const { oldHead, newHead, depth } = change;
    // The blocks that follow a reorg replay finality from where the new chain stands.
    finalizedEpoch = Math.min(finalizedEpoch, epochs.finalizedEpoch(newHead.slot));
    send('chain_reorg', {
      slot: String(newHead.slot),
      depth: String(depth),
      old_head_block: oldHead.root,
      new_head_block: newHead.root,
      old_head_state: oldHead.stateRoot,
      new_head_state: newHead.stateRoot,
      epoch: String(epochs.epochOf(newHead.slot)),
      execution_optimistic: false,
    });
  }

  const unsubscribe = view.onChange(onChange);

  return {
    add(res, topics) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      res.flushHeaders();
      // Each stream's own clock, so every stream hears from the node within 10 s of opening.
      const keepalive = setInterval(() => res.write(':\n\n'), KEEPALIVE_MS);
      keepalive.unref();
      clients.set(res, { topics: new Set(topics), keepalive });
      res.on('close', () => {
        clearInterval(keepalive);
        clients.delete(res);
      });
    },
    close() {
      unsubscribe();
      for (const [res, { keepalive }] of clients) {
        clearInterval(keepalive);
        res.end();
      }
      clients.clear();
    },
  };
}
