/**
 * `/eth/v1/beacon/genesis`, headers, blocks, block roots and attestations, blob sidecars, blobs and
 * the deposit snapshot, each encoded by its Lodestar type (SSZ too where the Beacon API offers it).
 * The devnet carries no blobs, so blob lists are empty.
 */
import { ContainerType, ListCompositeType } from '@chainsafe/ssz';
import { DEPOSIT_CONTRACT_TREE_DEPTH } from '@lodestar/params';
import { ssz } from '@lodestar/types';
import { FORK, GENESIS_FORK_VERSION, VALIDATOR_COUNT } from './beacon-config.js';
import { electraAttestation, phase0Attestations } from './beacon-data.js';
import { chainMeta, resolveBlockId, type BeaconContext } from './beacon-ids.js';
import { fail, json, listParam, parseHex, sszOrJson, type BeaconRequest, type Reply } from './beacon-reply.js';
import type { NodeRoute } from './beacon-router.js';
import { genesisValidatorsRoot } from './beacon-state.js';
import type { SlotBlock } from './chain-view.js';
import { derivedRoot, derivedSignature } from './deterministic.js';
import { fromHex } from './hex.js';

/** EIP-4881's snapshot, which the Beacon API served as SSZ too; Lodestar no longer ships the type, so it is put together from Lodestar's own. */
const DepositTreeSnapshot = new ContainerType(
  {
    finalized: new ListCompositeType(ssz.Root, DEPOSIT_CONTRACT_TREE_DEPTH),
    depositRoot: ssz.Root,
    depositCount: ssz.UintNum64,
    executionBlockHash: ssz.Root,
    executionBlockHeight: ssz.UintNum64,
  },
  { typeName: 'DepositTreeSnapshot', jsonCase: 'eth2' },
);

/** `/eth/v1/beacon/headers` items: every served block is canonical, signed as its block is. */
function headerEntry(ctx: BeaconContext, b: SlotBlock): Record<string, unknown> {
  const message = {
    slot: b.slot,
    proposerIndex: ctx.validators.proposer(b.slot),
    parentRoot: fromHex(b.parentRoot),
    stateRoot: fromHex(b.stateRoot),
    bodyRoot: fromHex(b.bodyRoot),
  };
  return {
    root: b.root,
    canonical: true,
    header: ssz.phase0.SignedBeaconBlockHeader.toJson({ message, signature: fromHex(derivedSignature('block', b.root)) }),
  };
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

export function blockRoutes(ctx: BeaconContext): NodeRoute[] {
  return [
    {
      path: '/eth/v1/beacon/genesis',
      GET: () =>
        json({
          data: ssz.phase0.Genesis.toJson({
            genesisTime: ctx.view.genesis().timestamp,
            genesisValidatorsRoot: genesisValidatorsRoot(ctx.chain.facts),
            genesisForkVersion: GENESIS_FORK_VERSION,
          }),
        }),
    },
    { path: '/eth/v1/beacon/headers', GET: (req) => headers(ctx, req.query) },
    {
      path: '/eth/v1/beacon/headers/{block_id}',
      GET: withBlock(ctx, (b) => json({ ...chainMeta(ctx, b.slot), data: headerEntry(ctx, b) })),
    },
    {
      path: '/eth/v2/beacon/blocks/{block_id}',
      GET: withBlock(ctx, async (b, req) =>
        sszOrJson(req, ssz.electra.SignedBeaconBlock, await ctx.chain.signedBlock(b), { meta: chainMeta(ctx, b.slot), version: FORK }),
      ),
    },
    {
      path: '/eth/v1/beacon/blocks/{block_id}/root',
      GET: withBlock(ctx, (b) => json({ ...chainMeta(ctx, b.slot), data: { root: b.root } })),
    },
    {
      path: '/eth/v1/beacon/blocks/{block_id}/attestations',
      GET: withBlock(ctx, (b) =>
        json({
          ...chainMeta(ctx, b.slot),
          data: b.slot === 0 ? [] : phase0Attestations(ctx.chain.facts, b.slot - 1).map((a) => ssz.phase0.Attestation.toJson(a)),
        }),
      ),
    },
    {
      path: '/eth/v2/beacon/blocks/{block_id}/attestations',
      GET: withBlock(ctx, (b) =>
        json(
          {
            version: FORK,
            ...chainMeta(ctx, b.slot),
            data: b.slot === 0 ? [] : [ssz.electra.Attestation.toJson(electraAttestation(ctx.chain.facts, b.slot - 1))],
          },
          FORK,
        ),
      ),
    },
    {
      path: '/eth/v1/beacon/blob_sidecars/{block_id}',
      GET: withBlock(ctx, (b, req) => {
        const bad = listParam(req.query, 'indices').find((i) => !/^\d{1,15}$/.test(i));
        if (bad !== undefined) return fail(400, `invalid blob index: ${bad}`);
        return sszOrJson(req, ssz.deneb.BlobSidecars, [], { meta: chainMeta(ctx, b.slot), version: FORK });
      }),
    },
    {
      path: '/eth/v1/beacon/blobs/{block_id}',
      GET: withBlock(ctx, (b, req) => {
        const bad = listParam(req.query, 'versioned_hashes').find((h) => !parseHex(h, 32));
        if (bad !== undefined) return fail(400, `invalid versioned hash: ${bad}`);
        return sszOrJson(req, ssz.deneb.Blobs, [], { meta: chainMeta(ctx, b.slot) });
      }),
    },
    {
      path: '/eth/v1/beacon/deposit_snapshot',
      GET: (req) => {
        const depositRoot = fromHex(derivedRoot('deposit_root'));
        const snapshot = {
          finalized: [depositRoot],
          depositRoot,
          depositCount: VALIDATOR_COUNT,
          executionBlockHash: fromHex(ctx.view.genesis().execution.hash),
          executionBlockHeight: 0,
        };
        return sszOrJson(req, DepositTreeSnapshot, snapshot);
      },
    },
  ];
}
