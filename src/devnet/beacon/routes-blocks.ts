/**
 * `/eth/v1/beacon/genesis`, headers, blocks (JSON and SSZ), block roots and attestations, blob
 * sidecars, blobs and the deposit snapshot. The devnet carries no blobs, so blob lists are empty.
 */
import { FORK, forkVersion, VALIDATOR_COUNT } from './beacon-config.js';
import { beaconBlock, electraAttestation, headerEntry, phase0Attestations } from './beacon-data.js';
import { chainMeta, resolveBlockId, type BeaconContext } from './beacon-ids.js';
import { fail, json, listParam, parseHex, type BeaconRequest, type Reply } from './beacon-reply.js';
import type { Route } from './beacon-router.js';
import { genesisValidatorsRoot } from './beacon-state.js';
import type { SlotBlock } from './chain-view.js';
import { derivedRoot, derivedSignature } from './deterministic.js';
import { serialize } from './ssz.js';
import { signedBeaconBlock } from './ssz-electra.js';

export async function signedBlockJson(ctx: BeaconContext, b: SlotBlock): Promise<Record<string, unknown>> {
  const hashes = b.execution.transactions;
  const transactions = hashes.length === 0 ? [] : await ctx.rawTransactions(hashes);
  return { message: await beaconBlock(ctx, b, transactions), signature: derivedSignature('block', b.root) };
}

/** Runs `answer` on the block `block_id` names, or answers the 400/404 that explains why there is none. */
function withBlock(ctx: BeaconContext, answer: (b: SlotBlock, req: BeaconRequest) => Reply | Promise<Reply>) {
  return async (req: BeaconRequest): Promise<Reply> => {
    const r = await resolveBlockId(ctx, req.params.block_id ?? '');
    return r.ok ? answer(r.value, req) : r.reply;
  };
}

async function headers(ctx: BeaconContext, query: URLSearchParams): Promise<Reply> {
  const slotText = query.get('slot');
  const parentText = query.get('parent_root');
  let candidates: SlotBlock[];
  if (slotText !== null) {
    if (!/^\d{1,15}$/.test(slotText)) return fail(400, `invalid slot: ${slotText}`);
    const b = await ctx.view.blockAt(Number(slotText));
    candidates = b ? [b] : [];
  } else if (parentText !== null) {
    const parentRoot = parseHex(parentText, 32);
    if (!parentRoot) return fail(400, `invalid parent_root: ${parentText}`);
    const parent = await ctx.view.blockByRoot(parentRoot);
    const child = parent ? await ctx.view.blockAt(parent.slot + 1) : undefined;
    candidates = child ? [child] : [];
  } else {
    candidates = [ctx.view.head()];
  }
  if (parentText !== null) candidates = candidates.filter((b) => b.parentRoot === parentText.toLowerCase());
  const slot = candidates[0]?.slot ?? ctx.view.head().slot;
  return json({ ...chainMeta(ctx, slot), data: candidates.map((b) => headerEntry(ctx, b)) });
}

export function blockRoutes(ctx: BeaconContext): Route[] {
  return [
    {
      path: '/eth/v1/beacon/genesis',
      GET: () =>
        json({
          data: {
            genesis_time: String(ctx.view.genesis().timestamp),
            genesis_validators_root: genesisValidatorsRoot(ctx),
            genesis_fork_version: forkVersion('genesis'),
          },
        }),
    },
    { path: '/eth/v1/beacon/headers', GET: (req) => headers(ctx, req.query) },
    { path: '/eth/v1/beacon/headers/{block_id}', GET: withBlock(ctx, (b) => json({ ...chainMeta(ctx, b.slot), data: headerEntry(ctx, b) })) },
    {
      path: '/eth/v2/beacon/blocks/{block_id}',
      GET: withBlock(ctx, async (b, req) => {
        const signed = await signedBlockJson(ctx, b);
        if (req.wantsSsz) return { kind: 'ssz', bytes: serialize(signedBeaconBlock, signed), version: FORK };
        return json({ version: FORK, ...chainMeta(ctx, b.slot), data: signed }, FORK);
      }),
    },
    { path: '/eth/v1/beacon/blocks/{block_id}/root', GET: withBlock(ctx, (b) => json({ ...chainMeta(ctx, b.slot), data: { root: b.root } })) },
    {
      path: '/eth/v1/beacon/blocks/{block_id}/attestations',
      GET: withBlock(ctx, async (b) => json({ ...chainMeta(ctx, b.slot), data: b.slot === 0 ? [] : await phase0Attestations(ctx, b.slot - 1) })),
    },
    {
      path: '/eth/v2/beacon/blocks/{block_id}/attestations',
      GET: withBlock(ctx, async (b) =>
        json({ version: FORK, ...chainMeta(ctx, b.slot), data: b.slot === 0 ? [] : [await electraAttestation(ctx, b.slot - 1)] }, FORK),
      ),
    },
    {
      path: '/eth/v1/beacon/blob_sidecars/{block_id}',
      GET: withBlock(ctx, (b, req) => {
        const bad = listParam(req.query, 'indices').find((i) => !/^\d{1,15}$/.test(i));
        if (bad !== undefined) return fail(400, `invalid blob index: ${bad}`);
        return json({ version: FORK, ...chainMeta(ctx, b.slot), data: [] }, FORK);
      }),
    },
    {
      path: '/eth/v1/beacon/blobs/{block_id}',
      GET: withBlock(ctx, (b, req) => {
        const bad = listParam(req.query, 'versioned_hashes').find((h) => !parseHex(h, 32));
        if (bad !== undefined) return fail(400, `invalid versioned hash: ${bad}`);
        return json({ ...chainMeta(ctx, b.slot), data: [] });
      }),
    },
    {
      path: '/eth/v1/beacon/deposit_snapshot',
      GET: () => {
        const depositRoot = derivedRoot('deposit_root');
        return json({
          data: {
            finalized: [depositRoot],
            deposit_root: depositRoot,
            deposit_count: String(VALIDATOR_COUNT),
            execution_block_hash: ctx.view.genesis().root,
            execution_block_height: '0',
          },
        });
      },
    },
  ];
}
