/**
 * A small Beacon API node for the devnet that follows anvil's chain (slot n = block n). It exists so
 * `npm start` and the tests have a consensus-layer upstream without running a beacon client, which
 * would need validators and a network of its own. Its blocks and states are Lodestar's types
 * (`@lodestar/types`, mainnet preset), so its JSON, its SSZ and its roots are what those types make of
 * them. It imports nothing of the gateway, and the gateway works the same in front of Lighthouse,
 * Prysm, Teku, Nimbus or Lodestar.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SLOTS_PER_EPOCH } from '@lodestar/params';
import { createBeaconChain } from './beacon-chain.js';
import { createEventHub, parseTopics } from './beacon-events.js';
import type { BeaconContext } from './beacon-ids.js';
import type { Reply } from './beacon-reply.js';
import { createRouter } from './beacon-router.js';
import { followChain } from './chain-view.js';
import { createEpochs } from './epochs.js';
import { createExecutionClient } from './execution-client.js';
import { blockRoutes } from './routes-blocks.js';
import { nodeRoutes } from './routes-node.js';
import { stateRoutes } from './routes-states.js';
import { validatorRoutes } from './routes-validator.js';
import { createValidatorSet } from './validator-set.js';
import { errorText } from '../../log.js';

export interface BeaconNode {
  /** `http://host:port` of the node's Beacon API. */
  readonly url: string;
  readonly port: number;
  /** The current head slot (= anvil's latest block number as last polled). */
  headSlot(): number;
  /** Closes open event streams and the server, and stops following anvil. */
  stop(): Promise<void>;
}

export interface BeaconNodeOptions {
  /** Anvil's HTTP JSON-RPC URL. */
  executionUrl: string;
  /** Listen address; default 127.0.0.1. */
  host?: string;
  /** Listen port; default 0 (a free port). */
  port?: number;
  /** How often anvil is polled for new blocks, in ms; default 250. */
  pollMs?: number;
  /**
   * Slots per epoch of the node's own arithmetic (duties, finality, events); default 32, the preset's.
   * Another value suits tests that want finality sooner; the SSZ types keep the preset's sizes.
   */
  slotsPerEpoch?: number;
  /**
   * The newest slots whose blocks, states and roots are served (genesis always is); an older one is 404, as
   * on a pruning node, and what it needed is not kept, so memory stays bounded. At least 4 epochs; default
   * SLOTS_PER_HISTORICAL_ROOT (8192 with the mainnet preset): as far back as a state's block_roots reach.
   */
  historySlots?: number;
}

const MAX_BODY_BYTES = 1 << 20;

/** Whether `Accept` prefers SSZ over JSON (by q-value; on a tie, whichever is listed first). */
export function prefersSsz(accept: string | undefined): boolean {
  if (!accept) return false;
  let ssz = { q: 0, at: Infinity };
  let jsonQ = { q: 0, at: Infinity };
  accept.split(',').forEach((entry, at) => {
    const [type = '', ...params] = entry.split(';').map((p) => p.trim().toLowerCase());
    const qParam = params.find((p) => p.startsWith('q='));
    const q = qParam ? Number(qParam.slice(2)) || 0 : 1;
    if (type === 'application/octet-stream') ssz = { q, at };
    else if ((type === 'application/json' || type === '*/*' || type === 'application/*') && q > jsonQ.q) jsonQ = { q, at };
  });
  return ssz.q > 0 && (ssz.q > jsonQ.q || (ssz.q === jsonQ.q && ssz.at < jsonQ.at));
}

function readBody(req: IncomingMessage): Promise<{ ok: true; text: string } | { ok: false; reply: Reply }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY_BYTES) chunks.push(c);
    });
    req.on('end', () =>
      resolve(
        size > MAX_BODY_BYTES
          ? { ok: false, reply: { kind: 'error', status: 413, message: `body is larger than ${MAX_BODY_BYTES} bytes` } }
          : { ok: true, text: Buffer.concat(chunks).toString('utf8') },
      ),
    );
    req.on('error', reject);
  });
}

function validate(opts: BeaconNodeOptions): void {
  const errors: string[] = [];
  if (!/^https?:\/\//.test(opts.executionUrl)) errors.push('executionUrl must be an http(s) URL');
  if (opts.port !== undefined && (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535))
    errors.push('port must be an integer from 0 to 65535');
  if (opts.pollMs !== undefined && (!Number.isFinite(opts.pollMs) || opts.pollMs <= 0)) errors.push('pollMs must be a positive number');
  if (opts.slotsPerEpoch !== undefined && (!Number.isInteger(opts.slotsPerEpoch) || opts.slotsPerEpoch < 1))
    errors.push('slotsPerEpoch must be a positive integer');
  const epochSlots = opts.slotsPerEpoch ?? SLOTS_PER_EPOCH;
  if (opts.historySlots !== undefined && (!Number.isSafeInteger(opts.historySlots) || opts.historySlots < 4 * epochSlots))
    errors.push(`historySlots must be an integer of at least 4 epochs (${4 * epochSlots} slots)`);
  if (errors.length) throw new Error(`beacon node: ${errors.join('; ')}`);
}

export async function startBeaconNode(opts: BeaconNodeOptions): Promise<BeaconNode> {
  validate(opts);
  const host = opts.host ?? '127.0.0.1';
  const slotsPerEpoch = opts.slotsPerEpoch ?? SLOTS_PER_EPOCH;
  const stopping = new AbortController();
  const client = createExecutionClient(opts.executionUrl, stopping.signal);
  const chainId = await client.chainId();
  const epochs = createEpochs(slotsPerEpoch);
  const validators = createValidatorSet(epochs);
  const chain = createBeaconChain({
    epochs,
    validators,
    rawTransactions: (h) => client.rawTransactions([...h]),
    ...(opts.historySlots !== undefined ? { historySlots: opts.historySlots } : {}),
  });
  // Enough slots for finality and dependent roots to come from memory; none older than the history served.
  const window = Math.min(Math.max(1024, 4 * slotsPerEpoch), opts.historySlots ?? Number.POSITIVE_INFINITY);
  const view = await followChain({ client, chain, pollMs: opts.pollMs ?? 250, window });
  const ctx: BeaconContext = { view, chain, epochs, validators, chainId };
  const hub = createEventHub(ctx);
  const router = createRouter([
    ...nodeRoutes(ctx),
    ...blockRoutes(ctx),
    ...stateRoutes(ctx),
    ...validatorRoutes(ctx),
    {
      path: '/eth/v1/events',
      GET: (req) => {
        const topics = parseTopics(req.query);
        return topics.ok ? { kind: 'events', topics: topics.value } : topics.reply;
      },
    },
  ]);

  function write(req: IncomingMessage, res: ServerResponse, reply: Reply): void {
    const head = req.method === 'HEAD';
    switch (reply.kind) {
      case 'events':
        hub.add(res, reply.topics);
        return;
      case 'empty':
        res.writeHead(reply.status, { 'content-length': '0' }).end();
        return;
      case 'ssz':
        res.writeHead(200, {
          'content-type': 'application/octet-stream',
          'content-length': reply.bytes.length,
          ...(reply.version ? { 'eth-consensus-version': reply.version } : {}),
          ...reply.headers,
        });
        res.end(head ? undefined : reply.bytes);
        return;
      case 'json':
      case 'error': {
        const body = Buffer.from(JSON.stringify(reply.kind === 'json' ? reply.body : { code: reply.status, message: reply.message }));
        const headers: Record<string, string | number> = {
          'content-type': 'application/json',
          'content-length': body.length,
          ...reply.headers,
        };
        if (reply.kind === 'json' && reply.version) headers['eth-consensus-version'] = reply.version;
        res.writeHead(reply.kind === 'json' ? 200 : reply.status, headers);
        res.end(head ? undefined : body);
      }
    }
  }

  async function answer(req: IncomingMessage): Promise<Reply> {
    const url = new URL(req.url ?? '/', 'http://beacon.invalid');
    const match = router.match(req.method ?? 'GET', url.pathname);
    if (!match.ok) return match.reply;
    let body: unknown;
    if (req.method === 'POST') {
      const read = await readBody(req);
      if (!read.ok) return read.reply;
      if (read.text.trim() !== '') {
        try {
          body = JSON.parse(read.text);
        } catch {
          return { kind: 'error', status: 400, message: 'body is not valid JSON' };
        }
      }
    }
    return match.handler({ params: match.params, query: url.searchParams, body, wantsSsz: prefersSsz(req.headers.accept) });
  }

  const server = createServer((req, res) => {
    answer(req).then(
      (reply) => write(req, res, reply),
      // Thrown only when anvil could not be read for data outside the cache.
      (err: unknown) => write(req, res, { kind: 'error', status: 500, message: `execution node: ${errorText(err)}` }),
    );
  });

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, host, () => resolve());
    });
  } catch (err) {
    hub.close();
    view.stop();
    stopping.abort();
    throw err;
  }
  const port = (server.address() as AddressInfo).port;
  let stopped: Promise<void> | undefined;

  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    headSlot: () => view.head().slot,
    stop() {
      stopped ??= new Promise<void>((resolve) => {
        view.stop();
        stopping.abort();
        hub.close();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return stopped;
    },
  };
}
