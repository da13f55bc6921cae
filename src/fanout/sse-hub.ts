/**
 * One chain's Beacon event streams: one upstream link per topic, however many clients listen, each frame
 * written as the same Buffer to every listener of its topic. A client asking several topics is a listener of
 * each, so every topic reaches it in upstream order. A client's stream starts only once the upstream streams
 * of all its topics are open, so a client is never shown a stream that nothing feeds; one that joins open
 * topics starts at once.
 */

/** Why the hub ends a client: it fell too far behind, the hub closed, or its topics' upstream streams did
 *  not all open within openTimeoutMs (the client was never started). */
export type SseEnd = 'slow' | 'shutdown' | 'unavailable';

/** One client's stream, as the server holds it. */
export interface SseClient {
  /** The upstream streams of all the client's topics are open: its stream starts (the server sends its 200
   *  head). Called at most once, before any write. */
  start(): void;
  /** Writes bytes to the client; false when its socket is backpressured (the bytes were still taken). */
  write(bytes: Buffer): boolean;
  /** Ends the client's stream. The hub has already forgotten the client; calling its listener's remove()
   *  from here is harmless. */
  close(reason: SseEnd): void;
  /**
   * Set on a relay to another thread's hub (event-relay.ts), which has clients of its own: it gets no keep-alive
   * comments and onDelivered does not count it (that hub writes and counts its own), and it is never ended as
   * 'unavailable' but waits for its topics as long as it stays (that hub times its own clients out). Default false.
   */
  readonly relay?: boolean;
  /** Optional: called on a started client each time the upstream stream of one of its topics is lost (false)
   *  or opens again (true); a relay passes it on. */
  linkStatus?(topic: string, open: boolean): void;
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
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface SseHubOptions {
  /** Opens the upstream stream of a topic; in production an sse-link on the chain's node. onFrame receives
   *  client-ready frames; onStatus(true) tells that the stream opened, onStatus(false) that an open one was
   *  lost (see SseLinkOptions.onStatus); onSlow() that the link's source let go of this hub as too slow for it
   *  (a worker's relay, event-relay.ts): the topic's clients are cut as slow. close() must stop its calls. */
  openLink(topic: string, onFrame: (frame: Buffer) => void, onStatus: (open: boolean) => void, onSlow: () => void): { close(): void };
  /** How long a client waits for the upstream streams of its topics to open before it is ended as
   *  'unavailable', in ms (the chain's timeout_s). */
  openTimeoutMs: number;
  /** A `: keep-alive` comment goes to every client this often, in ms, so idle proxies keep the stream open
   *  (config sse.heartbeat_s, default 15 s). */
  heartbeatMs: number;
  /** A client with more than this many bytes held for it is cut as slow (default 1 MiB). */
  maxBufferedBytes: number;
  /** Called once per frame written to a client (metering: one RU per event); never for keep-alive comments. */
  onDelivered?(client: SseClient, topic: string, bytes: number): void;
  /** Called when a client is cut as slow, before its close('slow'). */
  onSlowClient?(client: SseClient): void;
  /** The heartbeat (one interval per hub) and each waiting client's open timeout. Default the global ones. */
  timers?: HubTimers;
}

export interface SseHub {
  /** Adds a client listening to `topics` (duplicates count once), opening links for topics not open yet;
   *  it is started at once when they all are, else when they open or ended as 'unavailable' after
   *  openTimeoutMs. Throws a TypeError for an empty list. After close(), the client is closed at once
   *  ('shutdown'). */
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
  /** Whether the upstream stream is open now. */
  up: boolean;
  /** Started clients: the only ones a frame is written to. */
  readonly members: Set<Member>;
  /** Clients not started yet (some topic of theirs is not up): they keep the link, and get no frame. */
  readonly waiting: Set<Member>;
}

interface HeldFrame {
  readonly frame: Buffer;
  readonly topic: string;
}

interface Member {
  readonly client: SseClient;
  readonly relay: boolean;
  readonly topics: Topic[];
  // Frames held while the socket is backpressured, oldest at `head`; those written are cleared.
  held: Array<HeldFrame | undefined>;
  head: number;
  heldBytes: number;
  backpressured: boolean;
  gone: boolean;
  started: boolean;
  /** Set while add() joins its topics, so a link that opens at once does not start it half joined. */
  joining: boolean;
  /** The open timeout while it waits. */
  timer: unknown;
}

const realTimers: HubTimers = {
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (handle) => clearInterval(handle as NodeJS.Timeout),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** One hub's state, in fields; its steps are the functions below, which take it. */
class SseHubState {
  readonly opts: SseHubOptions;
  readonly heartbeatMs: number;
  readonly maxBufferedBytes: number;
  readonly openTimeoutMs: number;
  readonly onDelivered: SseHubOptions['onDelivered'];
  readonly onSlowClient: SseHubOptions['onSlowClient'];
  readonly timers: HubTimers;
  readonly topics: Map<string, Topic>;
  readonly members: Set<Member>;
  heartbeat: unknown;
  closed: boolean;

  constructor(opts: SseHubOptions) {
    this.opts = opts;
    this.heartbeatMs = opts.heartbeatMs;
    this.maxBufferedBytes = opts.maxBufferedBytes;
    this.openTimeoutMs = opts.openTimeoutMs;
    this.onDelivered = opts.onDelivered;
    this.onSlowClient = opts.onSlowClient;
    this.timers = opts.timers ?? realTimers;
    this.topics = new Map();
    this.members = new Set();
    this.heartbeat = undefined;
    this.closed = false;
  }
}

function write(hub: SseHubState, m: Member, frame: Buffer, topic: string): void {
  if (!m.client.write(frame)) m.backpressured = true;
  if (!m.relay) hub.onDelivered?.(m.client, topic, frame.length);
}

function cutSlow(hub: SseHubState, m: Member): void {
  leave(hub, m);
  hub.onSlowClient?.(m.client);
  m.client.close('slow');
}

function send(hub: SseHubState, m: Member, frame: Buffer, topic: string): void {
  if (!m.backpressured) {
    write(hub, m, frame, topic);
    return;
  }
  m.held.push({ frame, topic });
  m.heldBytes += frame.length;
  if (m.heldBytes > hub.maxBufferedBytes) cutSlow(hub, m);
}

function fanOut(hub: SseHubState, topic: Topic, frame: Buffer): void {
  // A topic whose link was closed has no members left, so a late frame from that link reaches nobody.
  // Members removed during the loop (cut, or leaving from a callback) are skipped by the Set's iterator.
  for (const m of topic.members) send(hub, m, frame, topic.name);
}

function flush(hub: SseHubState, m: Member): void {
  while (m.head < m.held.length && !m.backpressured && !m.gone) {
    const { frame, topic } = m.held[m.head]!;
    m.held[m.head++] = undefined;
    m.heldBytes -= frame.length;
    write(hub, m, frame, topic);
  }
  if (m.head === m.held.length) {
    m.held = [];
    m.head = 0;
  }
}

function beat(hub: SseHubState): void {
  for (const m of hub.members) {
    if (m.started && !m.relay && !m.backpressured && !m.client.write(KEEP_ALIVE)) m.backpressured = true;
  }
}

/** Starts a waiting client once every topic of its is up: from then on it is a member that frames reach. */
function startIfReady(hub: SseHubState, m: Member): void {
  if (m.started || m.gone || m.joining) return;
  for (const topic of m.topics) if (!topic.up) return;
  m.started = true;
  if (m.timer !== undefined) hub.timers.clearTimeout(m.timer);
  m.timer = undefined;
  for (const topic of m.topics) {
    topic.waiting.delete(m);
    topic.members.add(m);
  }
  m.client.start();
}

function linkStatus(hub: SseHubState, topic: Topic, open: boolean): void {
  topic.up = open;
  for (const m of topic.members) m.client.linkStatus?.(topic.name, open);
  if (open) for (const m of topic.waiting) startIfReady(hub, m);
}

/** Forgets the member, closing the links it was the last listener of. */
function leave(hub: SseHubState, m: Member): void {
  if (m.gone) return;
  m.gone = true;
  hub.members.delete(m);
  m.held = [];
  m.heldBytes = 0;
  if (m.timer !== undefined) hub.timers.clearTimeout(m.timer);
  m.timer = undefined;
  for (const topic of m.topics) {
    topic.members.delete(m);
    topic.waiting.delete(m);
    if (topic.members.size > 0 || topic.waiting.size > 0) continue;
    hub.topics.delete(topic.name);
    const link = topic.link;
    topic.link = null;
    link?.close();
  }
  if (hub.members.size === 0 && hub.heartbeat !== undefined) {
    hub.timers.clearInterval(hub.heartbeat);
    hub.heartbeat = undefined;
  }
}

function join(hub: SseHubState, m: Member, name: string): void {
  const existing = hub.topics.get(name);
  if (existing !== undefined) {
    if (existing.waiting.has(m)) return;
    existing.waiting.add(m);
    m.topics.push(existing);
    return;
  }
  const topic: Topic = { name, link: null, up: false, members: new Set(), waiting: new Set([m]) };
  hub.topics.set(name, topic);
  m.topics.push(topic);
  topic.link = hub.opts.openLink(
    name,
    (frame) => fanOut(hub, topic, frame),
    (open) => linkStatus(hub, topic, open),
    () => {
      for (const m of [...topic.members, ...topic.waiting]) cutSlow(hub, m);
    },
  );
}

const inert: SseListener = { drained() {}, remove() {} };

function add(hub: SseHubState, client: SseClient, names: readonly string[]): SseListener {
  if (names.length === 0) throw new TypeError('a client must listen to at least one topic');
  if (hub.closed) {
    client.close('shutdown');
    return inert;
  }
  const m: Member = {
    client,
    relay: client.relay === true,
    topics: [],
    held: [],
    head: 0,
    heldBytes: 0,
    backpressured: false,
    gone: false,
    started: false,
    joining: true,
    timer: undefined,
  };
  hub.members.add(m);
  if (hub.heartbeat === undefined) hub.heartbeat = hub.timers.setInterval(() => beat(hub), hub.heartbeatMs);
  try {
    for (const name of names) join(hub, m, name);
  } catch (err) {
    leave(hub, m);
    throw err;
  }
  m.joining = false;
  startIfReady(hub, m);
  if (!m.started && !m.relay) {
    m.timer = hub.timers.setTimeout(() => {
      m.timer = undefined;
      leave(hub, m);
      m.client.close('unavailable');
    }, hub.openTimeoutMs);
  }
  return {
    drained() {
      if (m.gone) return;
      m.backpressured = false;
      flush(hub, m);
    },
    remove() {
      leave(hub, m);
    },
  };
}

export function createSseHub(opts: SseHubOptions): SseHub {
  const { heartbeatMs, maxBufferedBytes, openTimeoutMs } = opts;
  if (!(heartbeatMs > 0) || !Number.isFinite(heartbeatMs)) throw new TypeError('heartbeatMs must be a positive number');
  if (!(openTimeoutMs > 0) || !Number.isFinite(openTimeoutMs)) throw new TypeError('openTimeoutMs must be a positive number');
  if (!(maxBufferedBytes > 0) || !Number.isInteger(maxBufferedBytes)) {
    throw new TypeError('maxBufferedBytes must be a positive integer');
  }
  const hub = new SseHubState(opts);
  return {
    add: (client, names) => add(hub, client, names),
    topicsOpen: () => [...hub.topics.keys()],
    clients: () => hub.members.size,
    close() {
      if (hub.closed) return;
      hub.closed = true;
      for (const m of hub.members) {
        leave(hub, m);
        m.client.close('shutdown');
      }
    },
  };
}
