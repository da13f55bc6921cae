/**
 * `/eth/v1/validator/*` and block production: duties (attester by POSTed indices or the older API's
 * `?index=` query, sync by POSTed indices, proposer by epoch), attestation data, aggregates, sync committee contributions and `/eth/v3/validator/blocks`.
 */
import { BitArray } from '@chainsafe/ssz';
import { EPOCHS_PER_SYNC_COMMITTEE_PERIOD, SYNC_COMMITTEE_SIZE, SYNC_COMMITTEE_SUBNET_COUNT } from '@lodestar/params';
import { ssz } from '@lodestar/types';
import { FORK } from './beacon-config.js';
import { attestationData, blockBody, electraAttestation, executionPayload, phase0Attestations } from './beacon-data.js';
import type { BeaconContext } from './beacon-ids.js';
import {
  fail,
  found,
  json,
  listParam,
  missing,
  parseHex,
  parseUint,
  sszOrJson,
  type BeaconRequest,
  type Found,
  type Reply,
} from './beacon-reply.js';
import type { NodeRoute } from './beacon-router.js';
import { derivedRoot, derivedSignature } from './deterministic.js';
import { fromHex } from './hex.js';

/** A POSTed list of validator indices (strings, as the API sends uint64s); indices of no validator are left out. */
function indicesBody(ctx: BeaconContext, body: unknown): Found<number[]> {
  return Array.isArray(body) ? knownIndices(ctx, body) : missing(400, 'body must be a list of validator indices');
}

/** The older Beacon API's GET form: `?index=1,2` (repeats allowed), required. */
function indicesQuery(ctx: BeaconContext, query: URLSearchParams): Found<number[]> {
  const listed = listParam(query, 'index');
  return listed.length === 0 ? missing(400, 'index is required: a list of validator indices') : knownIndices(ctx, listed);
}

function knownIndices(ctx: BeaconContext, items: readonly unknown[]): Found<number[]> {
  const out: number[] = [];
  for (const item of items) {
    const text = typeof item === 'number' ? String(item) : item;
    if (typeof text !== 'string' || !/^\d{1,15}$/.test(text)) return missing(400, `invalid validator index: ${JSON.stringify(item)}`);
    if (Number(text) < ctx.validators.count) out.push(Number(text));
  }
  return found(out);
}

/** The path's epoch, at most one past the head's (duties are known one epoch ahead). */
function dutyEpoch(ctx: BeaconContext, req: BeaconRequest): Found<number> {
  const e = parseUint(req.params.epoch, 'epoch');
  if (!e.ok) return e;
  const current = ctx.epochs.epochOf(ctx.view.head().slot);
  return e.value > current + 1 ? missing(400, `epoch ${e.value} is more than one epoch past the current epoch ${current}`) : e;
}

async function dependentRoot(ctx: BeaconContext, slot: number): Promise<string> {
  const b = await ctx.view.blockAt(Math.min(slot, ctx.view.head().slot));
  return b?.root ?? '0x' + '00'.repeat(32);
}

async function attesterDuties(ctx: BeaconContext, req: BeaconRequest, byQuery: boolean): Promise<Reply> {
  const e = dutyEpoch(ctx, req);
  if (!e.ok) return e.reply;
  const wanted = byQuery ? indicesQuery(ctx, req.query) : indicesBody(ctx, req.body);
  if (!wanted.ok) return wanted.reply;
  const set = ctx.validators;
  const perSlot = set.committeesPerSlot();
  const data = [];
  for (const c of set.committees(e.value)) {
    for (const [position, index] of c.validators.entries()) {
      if (!wanted.value.includes(index)) continue;
      data.push({
        pubkey: set.pubkey(index),
        validator_index: String(index),
        committee_index: String(c.index),
        committee_length: String(c.validators.length),
        committees_at_slot: String(perSlot),
        validator_committee_index: String(position),
        slot: String(c.slot),
      });
    }
  }
  return json({ dependent_root: await dependentRoot(ctx, ctx.epochs.dependentSlot(e.value, 1)), execution_optimistic: false, data });
}

async function proposerDuties(ctx: BeaconContext, req: BeaconRequest): Promise<Reply> {
  const e = dutyEpoch(ctx, req);
  if (!e.ok) return e.reply;
  const start = ctx.epochs.startSlot(e.value);
  const data = Array.from({ length: ctx.epochs.slotsPerEpoch }, (_, i) => {
    const index = ctx.validators.proposer(start + i);
    return { pubkey: ctx.validators.pubkey(index), validator_index: String(index), slot: String(start + i) };
  });
  return json({ dependent_root: await dependentRoot(ctx, ctx.epochs.dependentSlot(e.value, 0)), execution_optimistic: false, data });
}

function syncDuties(ctx: BeaconContext, req: BeaconRequest): Reply {
  const e = parseUint(req.params.epoch, 'epoch');
  if (!e.ok) return e.reply;
  const period = (epoch: number): number => Math.floor(epoch / EPOCHS_PER_SYNC_COMMITTEE_PERIOD);
  const current = period(ctx.epochs.epochOf(ctx.view.head().slot));
  if (period(e.value) > current + 1) return fail(400, `epoch ${e.value} is past the next sync committee period`);
  const wanted = indicesBody(ctx, req.body);
  if (!wanted.ok) return wanted.reply;
  const members = ctx.validators.syncCommittee(e.value);
  const data = wanted.value
    .map((index) => ({
      pubkey: ctx.validators.pubkey(index),
      validator_index: String(index),
      validator_sync_committee_indices: members.flatMap((m, position) => (m === index ? [String(position)] : [])),
    }))
    .filter((d) => d.validator_sync_committee_indices.length > 0);
  return json({ execution_optimistic: false, data });
}

/** A slot the node can attest to: at most one past the head. */
function attestableSlot(ctx: BeaconContext, text: string | null): Found<number> {
  const s = parseUint(text, 'slot');
  if (!s.ok) return s;
  const head = ctx.view.head().slot;
  return s.value > head + 1 ? missing(400, `slot ${s.value} is in the future (head is ${head})`) : s;
}

function committeeIndex(ctx: BeaconContext, text: string | null): Found<number> {
  const c = parseUint(text, 'committee_index');
  if (!c.ok) return c;
  return c.value >= ctx.validators.committeesPerSlot() ? missing(400, `committee_index ${c.value} is out of range`) : c;
}

/** The block a validator would propose at `slot`: on the head (or the slot before), with an empty execution payload of its own. */
async function produceBlock(ctx: BeaconContext, req: BeaconRequest): Promise<Reply> {
  const s = parseUint(req.params.slot, 'slot');
  if (!s.ok) return s.reply;
  if (s.value === 0) return fail(400, 'cannot produce a block at genesis');
  const reveal = parseHex(req.query.get('randao_reveal') ?? '', 96);
  if (!reveal) return fail(400, 'randao_reveal must be a 96-byte 0x hex signature');
  const graffitiText = req.query.get('graffiti');
  const graffiti = graffitiText === null ? undefined : parseHex(graffitiText, 32);
  if (graffitiText !== null && !graffiti) return fail(400, 'graffiti must be 32 bytes of 0x hex');
  const head = ctx.view.head();
  const parent = (await ctx.view.blockAt(Math.min(s.value - 1, head.slot))) ?? head;
  const timestamp = ctx.view.genesis().timestamp + s.value * ctx.view.secondsPerSlot();
  const hash = derivedRoot('produced_payload', s.value, parent.root);
  const payload = executionPayload(
    {
      ...parent.execution,
      number: '0x' + s.value.toString(16),
      hash,
      parentHash: parent.execution.hash,
      timestamp: '0x' + timestamp.toString(16),
      gasUsed: '0x0',
      transactions: [],
      withdrawals: [],
    },
    [],
  );
  const body = blockBody(ctx.chain.facts, s.value, payload, fromHex(reveal));
  if (graffiti) body.graffiti = fromHex(graffiti);
  // The node never imports what it produces, so the post-state root is a stand-in.
  const block = {
    slot: s.value,
    proposerIndex: ctx.validators.proposer(s.value),
    parentRoot: fromHex(parent.root),
    stateRoot: fromHex(derivedRoot('produced_state', s.value, parent.root)),
    body,
  };
  const consensusValue = String(ctx.validators.count * 1_000_000);
  return sszOrJson(
    req,
    ssz.electra.BlockContents,
    { block, kzgProofs: [], blobs: [] },
    {
      meta: { execution_payload_blinded: false, execution_payload_value: '0', consensus_block_value: consensusValue },
      version: FORK,
      headers: {
        'Eth-Execution-Payload-Blinded': 'false',
        'Eth-Execution-Payload-Value': '0',
        'Eth-Consensus-Block-Value': consensusValue,
      },
    },
  );
}

export function validatorRoutes(ctx: BeaconContext): NodeRoute[] {
  return [
    {
      path: '/eth/v1/validator/duties/attester/{epoch}',
      GET: (req) => attesterDuties(ctx, req, true),
      POST: (req) => attesterDuties(ctx, req, false),
    },
    { path: '/eth/v1/validator/duties/proposer/{epoch}', GET: (req) => proposerDuties(ctx, req) },
    { path: '/eth/v1/validator/duties/sync/{epoch}', POST: (req) => syncDuties(ctx, req) },
    {
      path: '/eth/v1/validator/attestation_data',
      GET: async (req) => {
        const s = attestableSlot(ctx, req.query.get('slot'));
        if (!s.ok) return s.reply;
        const c = committeeIndex(ctx, req.query.get('committee_index'));
        if (!c.ok) return c.reply;
        return sszOrJson(req, ssz.phase0.AttestationData, attestationData(ctx.chain.facts, s.value));
      },
    },
    {
      path: '/eth/v1/validator/aggregate_attestation',
      GET: async (req) => {
        if (!parseHex(req.query.get('attestation_data_root') ?? '', 32))
          return fail(400, 'attestation_data_root must be a 32-byte 0x hex root');
        const s = attestableSlot(ctx, req.query.get('slot'));
        if (!s.ok) return s.reply;
        const [first] = phase0Attestations(ctx.chain.facts, s.value, 0);
        return first ? json({ data: ssz.phase0.Attestation.toJson(first) }) : fail(404, `no attestation for slot ${s.value}`);
      },
    },
    {
      path: '/eth/v2/validator/aggregate_attestation',
      GET: async (req) => {
        if (!parseHex(req.query.get('attestation_data_root') ?? '', 32))
          return fail(400, 'attestation_data_root must be a 32-byte 0x hex root');
        const s = attestableSlot(ctx, req.query.get('slot'));
        if (!s.ok) return s.reply;
        const c = committeeIndex(ctx, req.query.get('committee_index'));
        if (!c.ok) return c.reply;
        return sszOrJson(req, ssz.electra.Attestation, electraAttestation(ctx.chain.facts, s.value, c.value), { version: FORK });
      },
    },
    {
      path: '/eth/v1/validator/sync_committee_contribution',
      GET: (req) => {
        const s = attestableSlot(ctx, req.query.get('slot'));
        if (!s.ok) return s.reply;
        const sub = parseUint(req.query.get('subcommittee_index'), 'subcommittee_index');
        if (!sub.ok) return sub.reply;
        if (sub.value >= SYNC_COMMITTEE_SUBNET_COUNT) return fail(400, `subcommittee_index ${sub.value} is out of range`);
        const root = parseHex(req.query.get('beacon_block_root') ?? '', 32);
        if (!root) return fail(400, 'beacon_block_root must be a 32-byte 0x hex root');
        const size = SYNC_COMMITTEE_SIZE / SYNC_COMMITTEE_SUBNET_COUNT;
        const contribution = {
          slot: s.value,
          beaconBlockRoot: fromHex(root),
          subcommitteeIndex: sub.value,
          aggregationBits: BitArray.fromBoolArray(Array.from({ length: size }, () => true)),
          signature: fromHex(derivedSignature('sync_contribution', s.value, sub.value, root)),
        };
        return json({ data: ssz.altair.SyncCommitteeContribution.toJson(contribution) });
      },
    },
    { path: '/eth/v3/validator/blocks/{slot}', GET: (req) => produceBlock(ctx, req) },
  ];
}
