/**
 * The Beacon event-stream relay between worker threads and the main thread. The main thread's hub of a chain
 * (sse-hub.ts) keeps the one upstream stream per topic for the process; each worker runs a hub of its own for
 * its clients (heartbeats, backpressure, slow clients, open timeouts, metering: all as today), whose links are
 * not upstream streams but relay clients of the main hub, one per worker and topic. Frames cross the thread
 * boundary once per worker and topic, and the worker's hub writes each to its clients as one Buffer.
 *
 * What a worker's link reports is what an upstream link would: open (onStatus(true)) once the main hub's stream
 * of the topic is open, lost (false) when it is lost, open again when it is back. The main side never ends a
 * relay client for a stream that does not open (it is a `relay` client, see SseClient.relay): the worker's hub
 * ends its own waiting clients as 'unavailable' after its own openTimeoutMs, so a client gets its 502 as today.
 */
import type { MessagePort } from 'node:worker_threads';
import { createBacklogAcks, createRelayBacklog, DEFAULT_RELAY_BACKLOG_BYTES } from './relay-backlog.js';
import type { SseClient, SseEnd, SseHub, SseHubOptions, SseListener } from './sse-hub.js';

/** Worker → main. `link` is a number the worker gives, unique on its port. */
export type EventRelayRequest =
  /** Listen to `topic` of `chain`'s hub for this worker. */
  | { op: 'open'; link: number; chain: string; topic: string }
  /** The worker's hub closed the link (its last client of the topic left). */
  | { op: 'close'; link: number }
  /** The worker handled frames of `bytes` since its last ack (relay-backlog.ts). */
  | { op: 'ack'; bytes: number };

/** Main → worker. */
export type EventRelayEvent =
  /** One client-ready frame of the link's topic, in upstream order (the bytes the hub writes, transferred). */
  | { op: 'frame'; link: number; frame: ArrayBuffer }
  /** The topic's upstream stream is open (true) or an open one was lost (false). */
  | { op: 'status'; link: number; open: boolean }
  /** The main side let go of the link: its hub closed ('shutdown', a stop or a reload) or the chain has no hub. */
  | { op: 'end'; link: number; reason: SseEnd };

/** The main side of one worker's event relay. */
export interface EventRelayServer {
  /** Relay clients kept for the worker now (one per chain and topic it listens to). */
  links(): number;
  /** Frame bytes posted to the worker that it has not acknowledged. */
  backlogBytes(): number;
  /** Removes every relay client and closes the port. */
  close(): void;
}

export interface EventRelayServerOptions {
  /**
   * Frame bytes posted to the worker and not yet handled there, at most (config server.worker_relay_max_bytes,
   * default 64 MiB): past it every link of the worker is ended as its clients' slow streams are ('slow': each
   * client is ended with ": closed: slow consumer") and new ones are refused until half of it has drained.
   */
  maxBacklogBytes?: number;
}

/**
 * Serves one worker's event relay on `port` over the main thread's hubs: `eventsOf(chain)` gives the chain's
 * hub now, or null when it has none (the link is then ended as 'unavailable' and the worker asks again).
 */
export function serveEventRelay(
  port: MessagePort,
  eventsOf: (chain: string) => SseHub | null,
  opts: EventRelayServerOptions = {},
): EventRelayServer {
  const links = new Map<number, SseListener>();
  let closed = false;
  const post = (event: EventRelayEvent, transfer?: ArrayBuffer[]): void => {
    if (!closed) port.postMessage(event, transfer);
  };
  const backlog = createRelayBacklog(opts.maxBacklogBytes ?? DEFAULT_RELAY_BACKLOG_BYTES);

  /** The worker is too slow for its frames: every link ends as a slow one. */
  function dropSlowWorker(): void {
    const all = [...links];
    links.clear();
    for (const [link, listener] of all) {
      listener.remove();
      post({ op: 'end', link, reason: 'slow' });
    }
  }

  function open(link: number, chain: string, topic: string): void {
    const hub = eventsOf(chain);
    if (hub === null) return post({ op: 'end', link, reason: 'unavailable' });
    if (backlog.overloaded()) return post({ op: 'end', link, reason: 'slow' });
    let ended = false;
    const client: SseClient = {
      relay: true,
      start: () => post({ op: 'status', link, open: true }),
      linkStatus: (_topic, isOpen) => post({ op: 'status', link, open: isOpen }),
      write(bytes) {
        // An exact copy, transferred: cloning a pooled Buffer would copy the whole pool slab it sits in.
        const frame = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
        post({ op: 'frame', link, frame }, [frame]);
        // Counted from `bytes`: the transferred frame is detached here now, its byteLength 0.
        if (!closed && !backlog.posted(bytes.byteLength)) dropSlowWorker();
        return true;
      },
      close(reason) {
        ended = true;
        links.delete(link);
        post({ op: 'end', link, reason });
      },
    };
    const listener = hub.add(client, [topic]);
    if (!ended) links.set(link, listener);
  }

  function dropAll(): void {
    const all = [...links.values()];
    links.clear();
    for (const listener of all) listener.remove();
  }

  port.on('message', (msg: EventRelayRequest) => {
    switch (msg.op) {
      case 'open':
        return open(msg.link, msg.chain, msg.topic);
      case 'ack':
        return backlog.acked(msg.bytes);
      case 'close': {
        const listener = links.get(msg.link);
        links.delete(msg.link);
        listener?.remove();
        return;
      }
      default:
        msg satisfies never;
    }
  });
  // The worker died or was stopped: its links go, and with the last listener of a topic its upstream stream.
  port.on('close', () => {
    dropAll();
    closed = true;
  });

  return {
    links: () => links.size,
    backlogBytes: () => backlog.bytes(),
    close() {
      if (closed) return;
      dropAll();
      closed = true;
      port.close();
    },
  };
}

/** A worker's client of its event relay port. */
export interface EventRelayClient {
  /** An SseHubOptions.openLink for the worker's hub of `chain`: each link is a relay client of the main hub. */
  openLink(chain: string): SseHubOptions['openLink'];
  /** Closes every link and the port. */
  close(): void;
}

export interface EventRelayClientOptions {
  /** After the main side ends a link (its hub closed or absent), the link asks again this much later, in ms, as
   *  an upstream link reconnects. Default 1_000. */
  retryMs?: number;
}

interface Link {
  readonly chain: string;
  readonly topic: string;
  readonly onFrame: (frame: Buffer) => void;
  readonly onStatus: (open: boolean) => void;
  readonly onSlow: () => void;
  /** The id of its current relay client on the main side. */
  id: number;
  open: boolean;
  retry: NodeJS.Timeout | undefined;
}

export function connectEventRelay(port: MessagePort, opts: EventRelayClientOptions = {}): EventRelayClient {
  const retryMs = opts.retryMs ?? 1_000;
  const byId = new Map<number, Link>();
  /** Every link not closed, those waiting to ask again included. */
  const links = new Set<Link>();
  let nextId = 0;
  let closed = false;
  const send = (msg: EventRelayRequest): void => {
    if (!closed) port.postMessage(msg);
  };

  function ask(link: Link): void {
    link.retry = undefined;
    link.id = ++nextId;
    byId.set(link.id, link);
    send({ op: 'open', link: link.id, chain: link.chain, topic: link.topic });
  }

  function ended(link: Link): void {
    byId.delete(link.id);
    if (link.open) {
      link.open = false;
      link.onStatus(false);
    }
    if (!closed) {
      link.retry = setTimeout(() => ask(link), retryMs);
      link.retry.unref();
    }
  }

  /** What this thread has handled, told to the main side so it can bound what it queues here (relay-backlog.ts). */
  const acks = createBacklogAcks((bytes) => send({ op: 'ack', bytes }));

  port.on('message', (msg: EventRelayEvent) => {
    if (msg.op === 'frame') acks.took(msg.frame.byteLength);
    const link = byId.get(msg.link);
    if (link === undefined) return;
    switch (msg.op) {
      case 'frame':
        return link.onFrame(Buffer.from(msg.frame));
      case 'status':
        if (link.open === msg.open) return;
        link.open = msg.open;
        return link.onStatus(msg.open);
      case 'end':
        if (msg.reason === 'slow') {
          // The main side dropped this worker as too slow: the hub cuts the topic's clients, which closes the link.
          byId.delete(link.id);
          link.onSlow();
          if (!links.has(link)) return;
        }
        return ended(link);
      default:
        msg satisfies never;
    }
  });

  return {
    openLink: (chain) => (topic, onFrame, onStatus, onSlow) => {
      const link: Link = { chain, topic, onFrame, onStatus, onSlow, id: 0, open: false, retry: undefined };
      links.add(link);
      ask(link);
      return {
        close() {
          links.delete(link);
          if (link.retry !== undefined) clearTimeout(link.retry);
          link.retry = undefined;
          // A link closed while its retry waits has no relay client: byId no longer holds its id.
          if (byId.delete(link.id)) send({ op: 'close', link: link.id });
          link.id = 0;
        },
      };
    },
    close() {
      if (closed) return;
      for (const link of links) {
        if (link.retry !== undefined) clearTimeout(link.retry);
        if (byId.has(link.id)) send({ op: 'close', link: link.id });
      }
      links.clear();
      byId.clear();
      closed = true;
      port.close();
    },
  };
}
