/** The streaming sections: WebSocket and event-stream limits, the response cache, the filters. */
import { int, num, section } from './keys.js';

const GIB = 1 << 30;

export const WebsocketSchema = section(
  {
    max_connections_per_key: int(1, 1_000_000, 100, 'Open WebSockets of one endpoint key (429 at the upgrade).'),
    max_connections_per_ip: int(1, 1_000_000, 50, 'Open WebSockets of one client IP on the public path.'),
    max_subscriptions_per_connection: int(1, 100_000, 100, 'Subscriptions on one socket.'),
    max_message_bytes: int(64, GIB, 1_048_576, 'Bytes of one client frame; larger → close 1009.'),
    max_answer_bytes: int(1024, GIB, 33_554_432, 'Bytes of one answer sent over a WebSocket (held whole); larger → an error naming this.'),
    max_buffered_bytes: int(1024, GIB, 1_048_576, 'Bytes waiting for a subscriber that does not read; past it → closed.'),
    idle_timeout_s: int(8, 960, 120, 'A socket silent this long is closed; pings keep live clients.'),
    max_upstream_outage_s: int(1, 86_400, 60, 'Subscribers are closed with 1011 once the upstream is away this long.'),
  },
  'JSON-RPC over WebSocket and its subscriptions.',
);

export const SubscriptionsSchema = section(
  {
    replay_blocks: int(
      1,
      100_000,
      128,
      'Blocks below the head an eth_subscribe resume point (fromBlock) may reach: recent heads kept in memory; newHeads past it refused, logs past it fetched with eth_getLogs.',
    ),
    retract_grace_s: int(
      0,
      86_400,
      600,
      'How long the logs a logs filter delivered stay remembered after its last subscriber left, so a resume can retract those a reorg replaced.',
    ),
    retract_max_filters: int(
      0,
      1_000_000,
      1_000,
      'Logs filters remembered after their last subscriber left, at most; the oldest go first.',
    ),
    retract_max_bytes: int(
      0,
      GIB,
      33_554_432,
      "Bytes of remembered logs' JSON in all; past it filters without subscribers go first (oldest first), then the lowest blocks; 0 remembers none (no retractions).",
    ),
  },
  'Subscriptions that resume from a block (eth_subscribe fromBlock).',
);

export const SseSchema = section(
  {
    heartbeat_s: int(1, 3600, 15, 'A comment line this often keeps idle proxies from cutting event streams.'),
    max_buffered_bytes: int(
      1024,
      GIB,
      1_048_576,
      'Bytes waiting for a client that does not read; past it → ended (": closed: slow consumer").',
    ),
    max_connections_per_key: int(1, 1_000_000, 100, 'Open event streams of one endpoint key.'),
    max_connections_per_ip: int(1, 1_000_000, 50, 'Open event streams of one client IP on the public path.'),
  },
  'The Beacon event stream (GET /eth/v1/events).',
);

export const CacheSchema = section(
  {
    max_bytes: int(0, 64 * GIB, 67_108_864, 'Bytes of the response cache of final answers; 0 turns it off.'),
    hit_ru_factor: num(0, 1, 0.5, "A cache hit costs this share of the method's RU, rounded up."),
  },
  'Answers that cannot change any more, kept in memory.',
);

export const FiltersSchema = section(
  {
    max_per_key: int(1, 100_000, 100, 'Filters one endpoint key (or public client IP) may hold.'),
    idle_timeout_s: int(1, 86_400, 300, 'A filter not polled this long is removed, as nodes do.'),
  },
  'eth_newFilter and friends, served by the gateway itself.',
);
