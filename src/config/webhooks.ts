/** The `webhooks` section: owners' alerts (issue 36 §3, docs/api.md "Webhooks"), what the operator allows of them. */
import { bool, int, section } from './keys.js';

export const WebhooksSchema = section(
  {
    allow_private: bool(
      false,
      "Whether a webhook may be http:// and reach loopback and private addresses (the operator's own network, a test); false: https:// to public addresses only.",
    ),
    max_per_owner: int(0, 1000, 10, 'Webhooks one owner may register (0: none).'),
    retry_for_s: int(0, 86_400, 900, 'A failed delivery is retried with backoff (1 s, doubling to 5 min) for at most this long (s).'),
    timeout_ms: int(100, 60_000, 5000, 'How long one delivery attempt waits for the receiver to answer (ms).'),
    check_interval_s: int(
      1,
      3600,
      15,
      'How often the alerts are checked (s): balances, and refusals and errors in the current and last minute.',
    ),
  },
  "Owners' webhooks: alerts sent as signed JSON by the main thread (one sender per alert, even in a fleet).",
);
