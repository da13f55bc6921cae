/**
 * `/eth/v1/beacon/states/{state_id}/*` and the debug endpoints: roots, fork, finality, validators
 * and balances (GET with `id`/`status` queries, POST with a body), committees, sync committees,
 * RANDAO, the full state (JSON and SSZ), fork-choice heads and the fork-choice tree.
 */
import { ContainerType, ListCompositeType } from '@chainsafe/ssz';
import {
  EPOCHS_PER_HISTORICAL_VECTOR,
  EPOCHS_PER_SYNC_COMMITTEE_PERIOD,
  SYNC_COMMITTEE_SIZE,
  SYNC_COMMITTEE_SUBNET_COUNT,
  VALIDATOR_REGISTRY_LIMIT,
} from '@lodestar/params';
import { ssz } from '@lodestar/types';
import { CURRENT_FORK, FORK } from './beacon-config.js';
import { checkpoint } from './beacon-data.js';
import { chainMeta, resolveStateId, resolveValidatorIds, type BeaconContext } from './beacon-ids.js';
import { fail, json, listParam, parseUint, sszOrJson, type BeaconRequest, type Reply } from './beacon-reply.js';
import type { NodeRoute } from './beacon-router.js';
import { randaoMix } from './beacon-state.js';
import type { SlotBlock } from './chain-view.js';
import { toHex } from './hex.js';
import { isKnownStatus, statusMatches, VALIDATOR_STATUS } from './validator-set.js';

/** The Beacon API's validator balances as SSZ encodes them (the type Lodestar's API client decodes them with). */
const ValidatorBalances = new ListCompositeType(
  new ContainerType({ index: ssz.ValidatorIndex, balance: ssz.UintNum64 }, { typeName: 'ValidatorBalance', jsonCase: 'eth2' }),
  VALIDATOR_REGISTRY_LIMIT,
);

function withState(ctx: BeaconContext, answer: (b: SlotBlock, req: BeaconRequest) => Reply | Promise<Reply>) {
  return async (req: BeaconRequest): Promise<Reply> => {
    const r = await resolveStateId(ctx, req.params.state_id ?? '');
    return r.ok ? answer(r.value, req) : r.reply;
  };
}

/** The `epoch` query parameter, defaulting to the state's own epoch. */
function epochParam(ctx: BeaconContext, b: SlotBlock, query: URLSearchParams): { ok: true; epoch: number } | { ok: false; reply: Reply } {
  const text = query.get('epoch');
  if (text === null) return { ok: true, epoch: ctx.epochs.epochOf(b.slot) };
  const e = parseUint(text, 'epoch');
  return e.ok ? { ok: true, epoch: e.value } : e;
}

const stringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string' || typeof x === 'number');

function validators(ctx: BeaconContext, b: SlotBlock, ids: string[] | undefined, statuses: string[]): Reply {
  const unknownStatus = statuses.find((s) => !isKnownStatus(s));
  if (unknownStatus !== undefined) return fail(400, `invalid validator status: ${unknownStatus}`);
  const set = ctx.validators;
  const chosen =
    ids === undefined ? { ok: true as const, value: Array.from({ length: set.count }, (_, i) => i) } : resolveValidatorIds(set, ids);
  if (!chosen.ok) return chosen.reply;
  const epoch = ctx.epochs.epochOf(b.slot);
  const data = chosen.value
    .filter(() => statuses.length === 0 || statuses.some((s) => statusMatches(s, VALIDATOR_STATUS)))
    .sort((x, y) => x - y)
    .map((i) => validatorEntry(ctx, i, epoch));
  return json({ ...chainMeta(ctx, b.slot), data });
}

/** One `ValidatorResponse`: the registry record as its Lodestar type writes it. */
function validatorEntry(ctx: BeaconContext, index: number, epoch: number): Record<string, unknown> {
  const set = ctx.validators;
  return {
    index: String(index),
    balance: String(set.balance(index, epoch)),
    status: VALIDATOR_STATUS,
    validator: ssz.phase0.Validator.toJson(set.record(index)),
  };
}

function balances(ctx: BeaconContext, b: SlotBlock, ids: string[] | undefined, req: BeaconRequest): Reply {
  const set = ctx.validators;
  const chosen =
    ids === undefined || ids.length === 0
      ? { ok: true as const, value: Array.from({ length: set.count }, (_, i) => i) }
      : resolveValidatorIds(set, ids);
  if (!chosen.ok) return chosen.reply;
  const epoch = ctx.epochs.epochOf(b.slot);
  const data = chosen.value.sort((x, y) => x - y).map((index) => ({ index, balance: set.balance(index, epoch) }));
  return sszOrJson(req, ValidatorBalances, data, { meta: chainMeta(ctx, b.slot) });
}

function committees(ctx: BeaconContext, b: SlotBlock, query: URLSearchParams): Reply {
  const e = epochParam(ctx, b, query);
  if (!e.ok) return e.reply;
  const stateEpoch = ctx.epochs.epochOf(b.slot);
  // Committees are known one epoch ahead (MIN_SEED_LOOKAHEAD) and for as far back as the state remembers.
  if (e.epoch > stateEpoch + 1 || e.epoch + EPOCHS_PER_HISTORICAL_VECTOR <= stateEpoch)
    return fail(400, `epoch ${e.epoch} is out of range for a state in epoch ${stateEpoch}`);
  let list = ctx.validators.committees(e.epoch);
  const indexText = query.get('index');
  if (indexText !== null) {
    const i = parseUint(indexText, 'index');
    if (!i.ok) return i.reply;
    list = list.filter((c) => c.index === i.value);
  }
  const slotText = query.get('slot');
  if (slotText !== null) {
    const s = parseUint(slotText, 'slot');
    if (!s.ok) return s.reply;
    if (ctx.epochs.epochOf(s.value) !== e.epoch) return fail(400, `slot ${s.value} is not in epoch ${e.epoch}`);
    list = list.filter((c) => c.slot === s.value);
  }
  return json({
    ...chainMeta(ctx, b.slot),
    data: list.map((c) => ({ index: String(c.index), slot: String(c.slot), validators: c.validators.map(String) })),
  });
}

function syncCommittees(ctx: BeaconContext, b: SlotBlock, query: URLSearchParams): Reply {
  const e = epochParam(ctx, b, query);
  if (!e.ok) return e.reply;
  const period = (epoch: number): number => Math.floor(epoch / EPOCHS_PER_SYNC_COMMITTEE_PERIOD);
  const statePeriod = period(ctx.epochs.epochOf(b.slot));
  if (period(e.epoch) !== statePeriod && period(e.epoch) !== statePeriod + 1)
    return fail(400, `epoch ${e.epoch} is outside the current and next sync committee periods`);
  const members = ctx.validators.syncCommittee(e.epoch).map(String);
  const perSubnet = SYNC_COMMITTEE_SIZE / SYNC_COMMITTEE_SUBNET_COUNT;
  return json({
    ...chainMeta(ctx, b.slot),
    data: {
      validators: members,
      validator_aggregates: Array.from({ length: SYNC_COMMITTEE_SUBNET_COUNT }, (_, k) =>
        members.slice(k * perSubnet, (k + 1) * perSubnet),
      ),
    },
  });
}

function randao(ctx: BeaconContext, b: SlotBlock, query: URLSearchParams): Reply {
  const e = epochParam(ctx, b, query);
  if (!e.ok) return e.reply;
  const stateEpoch = ctx.epochs.epochOf(b.slot);
  if (e.epoch > stateEpoch || e.epoch + EPOCHS_PER_HISTORICAL_VECTOR <= stateEpoch)
    return fail(400, `epoch ${e.epoch} is out of range for a state in epoch ${stateEpoch}`);
  return json({ ...chainMeta(ctx, b.slot), data: { randao: toHex(randaoMix(e.epoch)) } });
}

async function forkChoice(ctx: BeaconContext): Promise<Reply> {
  const { epochs, view } = ctx;
  const headSlot = view.head().slot;
  const finalizedEpoch = epochs.finalizedEpoch(headSlot);
  const nodes = await view.blocksBetween(epochs.startSlot(finalizedEpoch), headSlot);
  const facts = ctx.chain.facts;
  return json({
    justified_checkpoint: ssz.phase0.Checkpoint.toJson(checkpoint(facts, epochs.justifiedEpoch(headSlot))),
    finalized_checkpoint: ssz.phase0.Checkpoint.toJson(checkpoint(facts, finalizedEpoch)),
    fork_choice_nodes: nodes.map((n) => ({
      slot: String(n.slot),
      block_root: n.root,
      parent_root: n.parentRoot,
      justified_epoch: String(epochs.justifiedEpoch(n.slot)),
      finalized_epoch: String(epochs.finalizedEpoch(n.slot)),
      // Every validator's weight sits on the one chain there is.
      weight: String(ctx.validators.count * 32_000_000_000),
      validity: 'valid',
      execution_block_hash: n.execution.hash.toLowerCase(),
      extra_data: {},
    })),
    extra_data: {},
  });
}

/**
 * A state's JSON is megabytes (the mainnet preset's vectors) and seconds to render, so the last one
 * rendered is kept: clients and tests asking for the head state again get it at once.
 */
function createStateJson(ctx: BeaconContext): (b: SlotBlock) => Promise<unknown> {
  let last: { stateRoot: string; data: unknown } | undefined;
  return async (b) => {
    if (last?.stateRoot !== b.stateRoot)
      last = { stateRoot: b.stateRoot, data: ssz.electra.BeaconState.toJson((await ctx.chain.state(b)).toValue()) };
    return last.data;
  };
}

/** Finality as the state holds it. */
async function finalityCheckpoints(ctx: BeaconContext, b: SlotBlock): Promise<Reply> {
  const state = await ctx.chain.state(b);
  const cp = ssz.phase0.Checkpoint;
  return json({
    ...chainMeta(ctx, b.slot),
    data: {
      previous_justified: cp.toJson(state.previousJustifiedCheckpoint.toValue()),
      current_justified: cp.toJson(state.currentJustifiedCheckpoint.toValue()),
      finalized: cp.toJson(state.finalizedCheckpoint.toValue()),
    },
  });
}

export function stateRoutes(ctx: BeaconContext): NodeRoute[] {
  const base = '/eth/v1/beacon/states/{state_id}';
  const stateJson = createStateJson(ctx);
  return [
    { path: `${base}/root`, GET: withState(ctx, (b) => json({ ...chainMeta(ctx, b.slot), data: { root: b.stateRoot } })) },
    { path: `${base}/fork`, GET: withState(ctx, (b) => json({ ...chainMeta(ctx, b.slot), data: ssz.phase0.Fork.toJson(CURRENT_FORK) })) },
    { path: `${base}/finality_checkpoints`, GET: withState(ctx, (b) => finalityCheckpoints(ctx, b)) },
    {
      path: `${base}/validators`,
      GET: withState(ctx, (b, req) => {
        const ids = listParam(req.query, 'id');
        return validators(ctx, b, ids.length ? ids : undefined, listParam(req.query, 'status'));
      }),
      POST: withState(ctx, (b, req) => {
        const body = (req.body ?? {}) as { ids?: unknown; statuses?: unknown };
        if (typeof body !== 'object' || Array.isArray(body)) return fail(400, 'body must be an object {ids, statuses}');
        if (body.ids != null && !stringList(body.ids)) return fail(400, 'ids must be a list of validator ids');
        if (body.statuses != null && !stringList(body.statuses)) return fail(400, 'statuses must be a list of strings');
        const ids = body.ids?.map(String);
        return validators(ctx, b, ids?.length ? ids : undefined, (body.statuses ?? []).map(String));
      }),
    },
    {
      path: `${base}/validators/{validator_id}`,
      GET: withState(ctx, (b, req) => {
        const id = req.params.validator_id ?? '';
        const r = resolveValidatorIds(ctx.validators, [id]);
        if (!r.ok) return r.reply;
        const index = r.value[0];
        if (index === undefined) return fail(404, `validator not found: ${id}`);
        return json({ ...chainMeta(ctx, b.slot), data: validatorEntry(ctx, index, ctx.epochs.epochOf(b.slot)) });
      }),
    },
    {
      path: `${base}/validator_balances`,
      GET: withState(ctx, (b, req) => balances(ctx, b, listParam(req.query, 'id'), req)),
      POST: withState(ctx, (b, req) => {
        if (req.body !== undefined && !stringList(req.body)) return fail(400, 'body must be a list of validator ids');
        return balances(ctx, b, req.body?.map(String), req);
      }),
    },
    { path: `${base}/committees`, GET: withState(ctx, (b, req) => committees(ctx, b, req.query)) },
    { path: `${base}/sync_committees`, GET: withState(ctx, (b, req) => syncCommittees(ctx, b, req.query)) },
    { path: `${base}/randao`, GET: withState(ctx, (b, req) => randao(ctx, b, req.query)) },
    {
      path: '/eth/v2/debug/beacon/states/{state_id}',
      GET: withState(ctx, async (b, req) => {
        if (req.wantsSsz) return { kind: 'ssz', bytes: (await ctx.chain.state(b)).serialize(), version: FORK };
        return json({ version: FORK, ...chainMeta(ctx, b.slot), data: await stateJson(b) }, FORK);
      }),
    },
    {
      path: '/eth/v2/debug/beacon/heads',
      GET: () => {
        const head = ctx.view.head();
        return json({ data: [{ root: head.root, slot: String(head.slot), execution_optimistic: false }] });
      },
    },
    { path: '/eth/v1/debug/fork_choice', GET: () => forkChoice(ctx) },
  ];
}
