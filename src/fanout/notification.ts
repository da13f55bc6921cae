/**
 * One eth_subscription message to a client, as the hub's fan-out (subscriptions.ts notify) and a replay
 * (replay.ts sendReplayed) send it, and the close of a connection whose owner cannot pay for it.
 */

/** The message text of result `resultJson` (JSON text, put in as it is) for subscription `id`. */
export function notificationFrame(id: string, resultJson: string): string {
  return `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${id}","result":${resultJson}}}`;
}

/** A notification its owner's balance cannot cover closes the connection with this. */
export const BALANCE_CLOSE = { code: 1008, reason: 'Insufficient RU balance' } as const;
