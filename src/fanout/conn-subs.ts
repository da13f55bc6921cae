/**
 * The subscriptions a client connection holds, by id, kept on the connection itself (SubscriberConn's
 * firstSubId/firstSub/moreSubs): the first without a Map, any more in one. The hub (subscriptions.ts) owns them.
 */
import type { SubscriberConn, Subscription } from './subscriptions.js';

/** How many subscriptions `conn` holds. */
export function subscriptionCount(conn: SubscriberConn): number {
  return (conn.firstSubId === null ? 0 : 1) + (conn.moreSubs?.size ?? 0);
}

export function subOf(conn: SubscriberConn, id: string): Subscription | undefined {
  return conn.firstSubId === id ? conn.firstSub! : conn.moreSubs?.get(id);
}

export function holdSub(conn: SubscriberConn, id: string, sub: Subscription): void {
  if (conn.firstSubId === null) {
    conn.firstSubId = id;
    conn.firstSub = sub;
  } else {
    (conn.moreSubs ??= new Map()).set(id, sub);
  }
}

export function releaseSub(conn: SubscriberConn, id: string): void {
  if (conn.firstSubId === id) {
    conn.firstSubId = null;
    conn.firstSub = null;
  } else {
    conn.moreSubs?.delete(id);
  }
}

export function subsOf(conn: SubscriberConn): Array<[string, Subscription]> {
  const all: Array<[string, Subscription]> = conn.firstSubId === null ? [] : [[conn.firstSubId, conn.firstSub!]];
  if (conn.moreSubs !== null) all.push(...conn.moreSubs);
  return all;
}
