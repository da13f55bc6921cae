/**
 * How a delivery is signed (docs/api.md "Webhooks"): `X-Chaingate-Signature: sha256=<hex>`, the HMAC-SHA256
 * with the webhook's secret of the `X-Chaingate-Timestamp` value, a dot and the body as sent. The timestamp
 * is inside the signature so a receiver can refuse an old delivery replayed (say, older than 5 minutes).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export function signDelivery(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** What a receiver does: the signature it was sent, checked in constant time. */
export function verifyDelivery(secret: string, timestamp: string, body: string, signature: string): boolean {
  const expected = Buffer.from(signDelivery(secret, timestamp, body));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
