/**
 * One chain's Beacon event streams: one upstream link per topic, however many clients listen, each frame
 * written as the same Buffer to every listener of its topic. A client asking several topics is a listener of
 * each, so every topic reaches it in upstream order.
 */

/** One client's stream, as the server holds it. */
export interface SseClient {
  /** Writes bytes to the client; false when its socket is backpressured (the bytes were still taken). */
  write(bytes: Buffer): boolean;
  /** Ends the client's stream: it fell too far behind ('slow'), or the hub closed ('shutdown'). The hub has
   *  already forgotten the client; calling its listener's remove() from here is harmless. */
  close(reason: 'slow' | 'shutdown'): void;
}

/** A client's place in the hub. */
export interface SseListener {
  /** The client's socket drained (uWS onWritable): frames held for it are written, in order. */
  drained(): void;
  /** The client left. Idempotent. */
  remove(): void;
}

/** The timers the hub uses; tests pass fakes. Handles are opaque. */
export interface HubTimers {
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

export interface SseHubOptions {
  /** Opens the upstream stream of a topic; in production an sse-link on the chain's node. onFrame receives
   *  client-ready frames. close() must stop its onFrame calls. */
  openLink(topic: string, onFrame: (frame: Buffer) => void): { close(): void };
  /** A `: keep-alive` comment goes to every client this often, in ms, so idle proxies keep the stream open
   *  (config sse.heartbeat_s, default 15 s). */
  heartbeatMs: number;
  /** A client with more than this many bytes held for it is cut as slow (default 1 MiB). */
  maxBufferedBytes: number;
  /** Called once per frame written to a client (metering: one RU per event); never for keep-alive comments. */
  onDelivered?(client: SseClient, topic: string, bytes: number): void;
  /** Called when a client is cut as slow, before its close('slow'). */
  onSlowClient?(client: SseClient): void;
  /** The heartbeat is one interval per hub; it is the only timer. Default the global ones. */
  timers?: HubTimers;
}

export interface SseHub {
  /** Adds a client listening to `topics` (duplicates count once), opening links for topics not open yet.
   *  Throws a TypeError for an empty list. After close(), the client is closed at once ('shutdown'). */
  add(client: SseClient, topics: readonly string[]): SseListener;
  /** The topics with an open link. */
  topicsOpen(): string[];
  /** Clients listening now. */
  clients(): number;
  /** Closes every client ('shutdown') and every link. */
  close(): void;
}

/** The comment written as heartbeat: a comment is never an event, so clients see nothing. */
const KEEP_ALIVE = Buffer.from(': keep-alive\n\n');

/** Headers of the 200 that opens a client's stream; no-transform and X-Accel-Buffering keep proxies from
 *  holding frames back. */
export const SSE_RESPONSE_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['content-type', 'text/event-stream'],
  ['cache-control', 'no-cache, no-transform'],
  ['x-accel-buffering', 'no'],
];

const TOPIC = /^[a-z][a-z0-9_]{0,63}$/;
export const MAX_TOPICS_PER_CLIENT = 32;

/**
 * Reads the `topics` query value (repeated parameters joined by ','): topic names, deduplicated, in the order
 * given. A name is lowercase letters, digits and '_' (every Beacon topic is), which also keeps it safe to put
 * in the upstream path. Which topics a node serves is the node's to say: an unknown one fails upstream and its
 * link keeps retrying, so a server may check names against a list of its own before adding a client.
 */
export function parseEventTopics(raw: string): { ok: true; topics: string[] } | { ok: false; message: string } {
  const topics: string[] = [];
  for (const name of raw.split(',')) {
    if (name === '') return { ok: false, message: 'topics must be a comma-separated list of names' };
    if (!TOPIC.test(name)) return { ok: false, message: `invalid topic ${JSON.stringify(name.slice(0, 64))}` };
    if (!topics.includes(name)) topics.push(name);
  }
  if (topics.length > MAX_TOPICS_PER_CLIENT) return { ok: false, message: `at most ${MAX_TOPICS_PER_CLIENT} topics` };
  return { ok: true, topics };
}

interface Topic {
  readonly name: string;
  link: { close(): void } | null;
  readonly members: Set<Member>;
}

interface HeldFrame {
  readonly frame: Buffer;
  readonly topic: string;
}

interface Member {
  readonly client: SseClient;
  readonly topics: Topic[];
  // Frames held while the socket is backpressured, oldest at `head`; those written are cleared.
  held: Array<HeldFrame | undefined>;
  head: number;
  heldBytes: number;
  backpressured: boolean;
  gone: boolean;
}

const realTimers: HubTimers = {
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (handle) => clearInterval(handle as NodeJS.Timeout),
};

export function createSseHub(opts: SseHubOptions): SseHub {
  const { heartbeatMs, maxBufferedBytes, onDelivered, onSlowClient } = opts;
  if (!(heartbeatMs > 0) || !Number.isFinite(heartbeatMs)) throw new TypeError('heartbeatMs must be a positive number');
  if (!(maxBufferedBytes > 0) || !Number.isInteger(maxBufferedBytes)) {
    throw new TypeError('maxBufferedBytes must be a positive integer');
  }
  const timers = opts.timers ?? realTimers;
  const topics = new Map<string, Topic>();
  const members = new Set<Member>();
  let heartbeat: unknown;
  let closed = false;

  function write(m: Member, frame: Buffer, topic: string): void {
    if (!m.client.write(frame)) m.backpressured = true;
    onDelivered?.(m.client, topic, frame.length);
  }

  function send(m: Member, frame: Buffer, topic: string): void {
    if (!m.backpressured) {
      write(m, frame, topic);
      return;
    }
    m.held.push({ frame, topic });
    m.heldBytes += frame.length;
    if (m.heldBytes > maxBufferedBytes) {
      leave(m);
      onSlowClient?.(m.client);
      m.client.close('slow');
    }
  }

  function fanOut(topic: Topic, frame: Buffer): void {
    // A topic whose link was closed has no members left, so a late frame from that link reaches nobody.
    // Members removed during the loop (cut, or leaving from a callback) are skipped by the Set's iterator.
    for (const m of topic.members) send(m, frame, topic.name);
  }

  function flush(m: Member): void {
    while (m.head < m.held.length && !m.backpressured && !m.gone) {
      const { frame, topic } = m.held[m.head]!;
      m.held[m.head++] = undefined;
      m.heldBytes -= frame.length;
      write(m, frame, topic);
    }
    if (m.head === m.held.length) {
      m.held = [];
      m.head = 0;
    }
  }

  function beat(): void {
    for (const m of members) {
      if (!m.backpressured && !m.client.write(KEEP_ALIVE)) m.backpressured = true;
    }
  }

  /** Forgets the member, closing the links it was the last listener of. */
  function leave(m: Member): void {
    if (m.gone) return;
    m.gone = true;
    members.delete(m);
    m.held = [];
    m.heldBytes = 0;
    for (const topic of m.topics) {
      topic.members.delete(m);
      if (topic.members.size > 0) continue;
      topics.delete(topic.name);
      const link = topic.link;
      topic.link = null;
      link?.close();
    }
    if (members.size === 0 && heartbeat !== undefined) {
      timers.clearInterval(heartbeat);
      heartbeat = undefined;
    }
  }

  function join(m: Member, name: string): void {
    const existing = topics.get(name);
    if (existing !== undefined) {
      if (existing.members.has(m)) return;
      existing.members.add(m);
      m.topics.push(existing);
      return;
    }
    const topic: Topic = { name, link: null, members: new Set([m]) };
    topics.set(name, topic);
    m.topics.push(topic);
    topic.link = opts.openLink(name, (frame) => fanOut(topic, frame));
  }

  const inert: SseListener = { drained() {}, remove() {} };

  return {
    add(client, names) {
      if (names.length === 0) throw new TypeError('a client must listen to at least one topic');
      if (closed) {
        client.close('shutdown');
        return inert;
      }
      const m: Member = { client, topics: [], held: [], head: 0, heldBytes: 0, backpressured: false, gone: false };
      members.add(m);
      if (heartbeat === undefined) heartbeat = timers.setInterval(beat, heartbeatMs);
      try {
        for (const name of names) join(m, name);
      } catch (err) {
        leave(m);
        throw err;
      }
      return {
        drained() {
          if (m.gone) return;
          m.backpressured = false;
          flush(m);
        },
        remove() {
          leave(m);
        },
      };
    },
    topicsOpen: () => [...topics.keys()],
    clients: () => members.size,
    close() {
      if (closed) return;
      closed = true;
      for (const m of members) {
        leave(m);
        m.client.close('shutdown');
      }
    },
  };
}
