/**
 * `/eth/v1/node/*`, `/eth/v1/config/*` and the operation pools. The devnet node is alone on its
 * network (no peers) and healthy while anvil answers. Pools keep the last POSTed items so a GET shows
 * what was submitted.
 */
import { DEPOSIT_CONTRACT_ADDRESS, forkSchedule, FORK, specJson } from './beacon-config.js';
import type { BeaconContext } from './beacon-ids.js';
import { fail, json, parseUint, type BeaconRequest, type Reply } from './beacon-reply.js';
import type { NodeRoute } from './beacon-router.js';
import { derivedBytes } from './deterministic.js';

const POOL_LIMIT = 256;
const PEER_STATES = ['disconnected', 'connecting', 'connected', 'disconnecting'];
const PEER_DIRECTIONS = ['inbound', 'outbound'];
const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** A libp2p-looking peer id (secp256k1 keys start with 16Uiu2HAm), fixed for the devnet. */
function peerId(): string {
  const b = derivedBytes(44, 'peer_id');
  return '16Uiu2HAm' + Array.from(b, (x) => BASE58[x % 58]).join('');
}

function identity(): Record<string, unknown> {
  const id = peerId();
  return {
    peer_id: id,
    enr: 'enr:-' + derivedBytes(96, 'enr').toString('base64url'),
    p2p_addresses: [`/ip4/127.0.0.1/tcp/9000/p2p/${id}`],
    discovery_addresses: [`/ip4/127.0.0.1/udp/9000/p2p/${id}`],
    metadata: { seq_number: '1', attnets: '0x0000000000000000', syncnets: '0x00' },
  };
}

interface Pool {
  readonly name: string;
  /** Whether one POST carries a list of items (attestations) or a single item (a slashing, an exit). */
  readonly postsList: boolean;
  readonly version?: string;
  readonly items: unknown[];
}

function submit(pool: Pool, body: unknown): Reply {
  const items = pool.postsList ? body : [body];
  if (!Array.isArray(items) || items.some((i) => typeof i !== 'object' || i === null || Array.isArray(i))) {
    return fail(400, pool.postsList ? `${pool.name}: body must be a list of objects` : `${pool.name}: body must be an object`);
  }
  pool.items.push(...items);
  pool.items.splice(0, Math.max(0, pool.items.length - POOL_LIMIT));
  return { kind: 'empty', status: 200 };
}

function listPool(pool: Pool, req: BeaconRequest): Reply {
  let items = pool.items;
  const slot = req.query.get('slot');
  if (slot !== null) {
    const s = parseUint(slot, 'slot');
    if (!s.ok) return s.reply;
    items = items.filter((i) => (i as { data?: { slot?: unknown } }).data?.slot === String(s.value));
  }
  return pool.version ? json({ version: pool.version, data: items }, pool.version) : json({ data: items });
}

function poolRoutes(): NodeRoute[] {
  const pool = (name: string, postsList: boolean, version?: string): Pool => ({
    name,
    postsList,
    items: [],
    ...(version ? { version } : {}),
  });
  const v1 = [
    pool('attestations', true),
    pool('attester_slashings', false),
    pool('proposer_slashings', false),
    pool('voluntary_exits', false),
    pool('sync_committees', true),
    pool('bls_to_execution_changes', true),
  ];
  const v2 = [pool('attestations', true, FORK), pool('attester_slashings', false, FORK)];
  const route = (prefix: string, p: Pool): NodeRoute => ({
    path: `${prefix}/${p.name}`,
    GET: (req) => listPool(p, req),
    POST: (req) => submit(p, req.body),
  });
  return [...v1.map((p) => route('/eth/v1/beacon/pool', p)), ...v2.map((p) => route('/eth/v2/beacon/pool', p))];
}

export function nodeRoutes(ctx: BeaconContext): NodeRoute[] {
  const { view } = ctx;
  return [
    {
      path: '/eth/v1/node/version',
      GET: () =>
        json({ data: { version: `chaingate-devnet-beacon/v0.1.0/${process.platform}-${process.arch}/node${process.versions.node}` } }),
    },
    {
      path: '/eth/v1/node/syncing',
      GET: () =>
        json({
          data: {
            head_slot: String(view.head().slot),
            sync_distance: '0',
            is_syncing: false,
            is_optimistic: false,
            el_offline: !view.executionOnline(),
          },
        }),
    },
    // 200 while anvil answers; 503 when the node cannot reach it, as a node without its execution client reports itself.
    { path: '/eth/v1/node/health', GET: () => ({ kind: 'empty', status: view.executionOnline() ? 200 : 503 }) },
    { path: '/eth/v1/node/identity', GET: () => json({ data: identity() }) },
    {
      path: '/eth/v1/node/peers',
      GET: (req) => {
        const bad = [
          ...req.query.getAll('state').filter((s) => !PEER_STATES.includes(s)),
          ...req.query.getAll('direction').filter((d) => !PEER_DIRECTIONS.includes(d)),
        ];
        if (bad.length) return fail(400, `invalid peer filter: ${bad.join(', ')}`);
        return json({ data: [], meta: { count: 0 } });
      },
    },
    {
      path: '/eth/v1/node/peer_count',
      GET: () => json({ data: { disconnected: '0', connecting: '0', connected: '0', disconnecting: '0' } }),
    },
    {
      path: '/eth/v1/config/spec',
      GET: () =>
        json({
          data: specJson(
            { secondsPerSlot: view.secondsPerSlot(), chainId: ctx.chainId, genesisTime: view.genesis().timestamp },
            ctx.epochs.slotsPerEpoch,
          ),
        }),
    },
    { path: '/eth/v1/config/fork_schedule', GET: () => json({ data: forkSchedule() }) },
    {
      path: '/eth/v1/config/deposit_contract',
      GET: () => json({ data: { chain_id: String(ctx.chainId), address: DEPOSIT_CONTRACT_ADDRESS } }),
    },
    ...poolRoutes(),
  ];
}
