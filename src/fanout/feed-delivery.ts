/**
 * A feed's delivery to its listeners: each notification turned into JSON text once and handed to every
 * listener registered before its step, the live changes of its upstream subscription, and its loss. A listener
 * that throws is logged and does not keep the others from their call.
 */
import { rememberLog } from './delivered-logs.js';
import type { Feed, FeedsState } from './feeds-state.js';

export function fanOut(state: FeedsState, feed: Feed, seq: number, result: unknown): void {
  const json = JSON.stringify(result);
  // A logs feed remembers what reached someone, for the retractions of a later resume (delivered-logs.ts).
  if (feed.memory !== null && feed.entries.size > 0) rememberLog(state.deliveredLogs!, feed.memory, result, json);
  for (const e of feed.entries) {
    if (e.since > seq) continue;
    try {
      e.listener.notify(json);
    } catch (err) {
      listenerThrew(state, feed, err);
    }
  }
}

export function tellLive(state: FeedsState, feed: Feed, live: boolean): void {
  for (const e of feed.entries) {
    try {
      e.listener.liveChanged?.(live);
    } catch (err) {
      listenerThrew(state, feed, err);
    }
  }
}

export function loseListeners(state: FeedsState, feed: Feed, reason: string): void {
  const entries = [...feed.entries];
  feed.entries.clear();
  for (const e of entries) {
    try {
      e.listener.lost(reason);
    } catch (err) {
      listenerThrew(state, feed, err);
    }
  }
}

function listenerThrew(state: FeedsState, feed: Feed, err: unknown): void {
  state.opts.log('warn', 'feed listener threw', { kind: feed.kind, error: String(err).slice(0, 200) });
}
