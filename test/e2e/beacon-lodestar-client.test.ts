/**
 * Lodestar's own API client (`@lodestar/api`) reads the devnet's beacon node through the gateway:
 * every GET path of the Beacon allowlist, asking for SSZ where the Beacon API offers it and JSON
 * elsewhere, and every answer decodes with Lodestar's types. Paths today's client no longer defines
 * (the specification's older forms) are read with route definitions put together from Lodestar's own
 * codecs. The set of paths read is checked against the allowlist, so a new GET path cannot be skipped.
 */
import t from 'tap';
import { ContainerType, ListCompositeType, type Type } from '@chainsafe/ssz';
import { getClient, routes, WireFormat, type ApiClient, type ApiResponse, type Endpoint } from '@lodestar/api';
import { chainConfigFromJson, createChainForkConfig, defaultChainConfig } from '@lodestar/config';
import { ssz } from '@lodestar/types';
import { BEACON_ROUTES, EVENTS_TEMPLATE } from '../../src/beacon/paths.js';
import { devnetBeacon } from '../support/devnet-beacon.js';
import { minedReceipt } from '../support/dev-chain.js';
import { waitFor } from '../support/wait-for.js';
import { rpc } from '../support/rpc.js';

/** The GET paths whose answers the Beacon API offers as SSZ (application/octet-stream), as it lists or listed them. */
const SSZ_PATHS: ReadonlySet<string> = new Set([
  '/eth/v2/beacon/blocks/{block_id}',
  '/eth/v2/debug/beacon/states/{state_id}',
  '/eth/v1/beacon/blobs/{block_id}',
  '/eth/v1/beacon/blob_sidecars/{block_id}',
  '/eth/v1/beacon/deposit_snapshot',
  '/eth/v1/beacon/states/{state_id}/validator_balances',
  '/eth/v1/validator/attestation_data',
  '/eth/v2/validator/aggregate_attestation',
  '/eth/v3/validator/blocks/{slot}',
]);

type Request = Parameters<ApiClient['httpClient']['request']>[0];
type Init = { responseWireFormat: WireFormat };

/**
 * A GET route of the specification that today's client has dropped: the current route's request
 * and meta codecs where they still fit, with the older data type.
 */
function olderRoute(
  url: string,
  from: Request,
  writeReq: (args: never) => unknown,
  data: Type<unknown>,
  meta: Request['resp']['meta'],
): Request {
  return {
    ...from,
    url,
    method: 'GET',
    operationId: `older ${url}`,
    urlFormatter: (params: Record<string, string | number>) => url.replace(/\{(\w+)\}/g, (_, k: string) => String(params[k])),
    req: { writeReq, parseReq: () => ({}), schema: {} },
    resp: { ...from.resp, data, meta, onlySupport: undefined },
  } as unknown as Request;
}

/** EIP-4881's deposit snapshot, which the Beacon API served as SSZ; Lodestar dropped the route and its type. */
const DepositSnapshot = new ContainerType(
  {
    finalized: new ListCompositeType(ssz.Root, 32),
    depositRoot: ssz.Root,
    depositCount: ssz.UintNum64,
    executionBlockHash: ssz.Root,
    executionBlockHeight: ssz.UintNum64,
  },
  { jsonCase: 'eth2' },
);

t.test("Lodestar's API client reads every GET path of the allowlist through the gateway, and every value decodes", async (t) => {
  const { anvil, node, g } = await devnetBeacon(t);
  // A transfer, so block 1 has a transaction, then slots enough for finality and every duty epoch.
  const sent = await rpc(anvil.url, 'eth_sendTransaction', [
    { from: '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266', to: '0x70997970c51812dc3a010c7d01b50e0d17dc79c8', value: '0x1' },
  ]);
  // Anvil answers the send before its automine: mining on at once could take the transfer, a block short of 100.
  const hash = (sent.json as { result: string }).result;
  await minedReceipt(anvil.url, hash);
  await rpc(anvil.url, 'anvil_mine', ['0x63']);
  await waitFor(() => node.headSlot() === 100, { what: 'the beacon node at slot 100', ms: 15_000 });
  const baseUrl = `${g.base}/devnet-beacon/v1/rpc/public`;

  // The devnet's chain config, as the node publishes it, read with the client itself.
  const bootstrap = getClient({ baseUrl }, { config: createChainForkConfig(defaultChainConfig) });
  const spec = (await bootstrap.config.getSpec()).value();
  const config = createChainForkConfig(chainConfigFromJson(spec));
  t.equal(config.getForkName(0), 'electra', "the devnet's config: Electra from genesis");
  const api = getClient({ baseUrl }, { config });

  const defs = {
    beacon: routes.beacon.getDefinitions(config),
    validator: routes.validator.getDefinitions(config),
    node: routes.node.getDefinitions(config),
  };
  const noMeta = defs.beacon.getGenesis.resp.meta as Request['resp']['meta'];
  const optimisticFinalized = defs.beacon.getBlockRoot.resp.meta as Request['resp']['meta'];
  const older = {
    blockAttestations: olderRoute(
      '/eth/v1/beacon/blocks/{block_id}/attestations',
      defs.beacon.getBlockAttestationsV2 as unknown as Request,
      ({ blockId }: { blockId: string }) => ({ params: { block_id: blockId } }),
      new ListCompositeType(ssz.phase0.Attestation, 128),
      optimisticFinalized,
    ),
    depositSnapshot: olderRoute(
      '/eth/v1/beacon/deposit_snapshot',
      defs.beacon.getGenesis as unknown as Request,
      () => ({}),
      DepositSnapshot,
      noMeta,
    ),
    attesterDutiesByGet: olderRoute(
      '/eth/v1/validator/duties/attester/{epoch}',
      defs.validator.getAttesterDuties as unknown as Request,
      ({ epoch, indices }: { epoch: number; indices: number[] }) => ({ params: { epoch }, query: { index: indices } }),
      defs.validator.getAttesterDuties.resp.data as Type<unknown>,
      defs.validator.getAttesterDuties.resp.meta as Request['resp']['meta'],
    ),
    aggregateV1: olderRoute(
      '/eth/v1/validator/aggregate_attestation',
      defs.validator.getAggregatedAttestationV2 as unknown as Request,
      ({ root, slot }: { root: string; slot: number }) => ({ query: { attestation_data_root: root, slot } }),
      ssz.phase0.Attestation,
      noMeta,
    ),
    poolAttestationsV1: olderRoute(
      '/eth/v1/beacon/pool/attestations',
      defs.beacon.getPoolAttestationsV2 as unknown as Request,
      () => ({ query: {} }),
      new ListCompositeType(ssz.phase0.Attestation, 1024),
      noMeta,
    ),
    poolAttesterSlashingsV1: olderRoute(
      '/eth/v1/beacon/pool/attester_slashings',
      defs.beacon.getPoolAttesterSlashingsV2 as unknown as Request,
      () => ({}),
      new ListCompositeType(ssz.phase0.AttesterSlashing, 1024),
      noMeta,
    ),
    // The specification's table lists this pool by GET; the Beacon API only ever defined its POST.
    poolSyncCommittees: olderRoute(
      '/eth/v1/beacon/pool/sync_committees',
      defs.beacon.getPoolVoluntaryExits as unknown as Request,
      () => ({}),
      new ListCompositeType(ssz.altair.SyncCommitteeMessage, 1024),
      noMeta,
    ),
  };
  const readOlder = (r: Request, args: unknown) => (init: Init) => api.httpClient.request(r as never, args as never, init);

  // Something in each pool that has a type on both sides, submitted with the client as a validator would.
  const sig = new Uint8Array(96).fill(0xab);
  for (const [pool, submitted] of [
    [
      'voluntary_exits',
      await api.beacon.submitPoolVoluntaryExit({ signedVoluntaryExit: { message: { epoch: 1, validatorIndex: 3 }, signature: sig } }),
    ],
    ['proposer_slashings', await api.beacon.submitPoolProposerSlashings({ proposerSlashing: ssz.phase0.ProposerSlashing.defaultValue() })],
    [
      'bls_to_execution_changes',
      await api.beacon.submitPoolBLSToExecutionChange({ blsToExecutionChanges: [ssz.capella.SignedBLSToExecutionChange.defaultValue()] }),
    ],
    [
      'v2 attester_slashings',
      await api.beacon.submitPoolAttesterSlashingsV2({ attesterSlashing: ssz.electra.AttesterSlashing.defaultValue() }),
    ],
    [
      'sync_committees',
      await api.beacon.submitPoolSyncCommitteeSignatures({
        signatures: [{ slot: 99, beaconBlockRoot: new Uint8Array(32), validatorIndex: 1, signature: sig }],
      }),
    ],
  ] as const) {
    t.equal(submitted.status, 200, `POST pool ${pool}: submitted`);
  }

  const headRoot = (await api.beacon.getBlockRoot({ blockId: 'head' })).value().root;
  const reveal = new Uint8Array(96).fill(0xcd);
  const reads: Record<string, (init: Init) => Promise<ApiResponse<Endpoint>>> = {
    '/eth/v1/node/version': (init) => api.node.getNodeVersion(init),
    '/eth/v1/node/syncing': (init) => api.node.getSyncingStatus(init),
    '/eth/v1/node/health': (init) => api.node.getHealth({}, init),
    '/eth/v1/node/identity': (init) => api.node.getNetworkIdentity(init),
    '/eth/v1/node/peers': (init) => api.node.getPeers({}, init),
    '/eth/v1/node/peer_count': (init) => api.node.getPeerCount(init),
    '/eth/v1/beacon/genesis': (init) => api.beacon.getGenesis(init),
    '/eth/v1/beacon/headers': (init) => api.beacon.getBlockHeaders({}, init),
    '/eth/v1/beacon/headers/{block_id}': (init) => api.beacon.getBlockHeader({ blockId: 'head' }, init),
    '/eth/v2/beacon/blocks/{block_id}': (init) => api.beacon.getBlockV2({ blockId: 1 }, init),
    '/eth/v1/beacon/blocks/{block_id}/root': (init) => api.beacon.getBlockRoot({ blockId: 'finalized' }, init),
    '/eth/v1/beacon/blocks/{block_id}/attestations': readOlder(older.blockAttestations, { blockId: 'head' }),
    '/eth/v1/beacon/blob_sidecars/{block_id}': (init) => api.beacon.getBlobSidecars({ blockId: 'head' }, init),
    '/eth/v1/beacon/deposit_snapshot': readOlder(older.depositSnapshot, {}),
    '/eth/v2/beacon/blocks/{block_id}/attestations': (init) => api.beacon.getBlockAttestationsV2({ blockId: 'head' }, init),
    '/eth/v1/beacon/blobs/{block_id}': (init) => api.beacon.getBlobs({ blockId: 'head' }, init),
    '/eth/v1/beacon/states/{state_id}/root': (init) => api.beacon.getStateRoot({ stateId: 'head' }, init),
    '/eth/v1/beacon/states/{state_id}/fork': (init) => api.beacon.getStateFork({ stateId: 'head' }, init),
    '/eth/v1/beacon/states/{state_id}/finality_checkpoints': (init) => api.beacon.getStateFinalityCheckpoints({ stateId: 'head' }, init),
    '/eth/v1/beacon/states/{state_id}/validators': (init) => api.beacon.getStateValidators({ stateId: 'head' }, init),
    '/eth/v1/beacon/states/{state_id}/validators/{validator_id}': (init) =>
      api.beacon.getStateValidator({ stateId: 'head', validatorId: 5 }, init),
    '/eth/v1/beacon/states/{state_id}/validator_balances': (init) => api.beacon.getStateValidatorBalances({ stateId: 'head' }, init),
    '/eth/v1/beacon/states/{state_id}/committees': (init) => api.beacon.getEpochCommittees({ stateId: 'head' }, init),
    '/eth/v1/beacon/states/{state_id}/sync_committees': (init) => api.beacon.getEpochSyncCommittees({ stateId: 'head' }, init),
    '/eth/v1/beacon/states/{state_id}/randao': (init) => api.beacon.getStateRandao({ stateId: 'head' }, init),
    '/eth/v1/config/spec': (init) => api.config.getSpec(init),
    '/eth/v1/config/fork_schedule': (init) => api.config.getForkSchedule(init),
    '/eth/v1/config/deposit_contract': (init) => api.config.getDepositContract(init),
    '/eth/v1/validator/duties/attester/{epoch}': readOlder(older.attesterDutiesByGet, { epoch: 3, indices: [0, 1, 2, 3] }),
    '/eth/v1/validator/duties/proposer/{epoch}': (init) => api.validator.getProposerDuties({ epoch: 3 }, init),
    '/eth/v1/validator/attestation_data': (init) => api.validator.produceAttestationData({ slot: 100, committeeIndex: 0 }, init),
    '/eth/v1/validator/aggregate_attestation': readOlder(older.aggregateV1, { root: '0x' + '11'.repeat(32), slot: 100 }),
    '/eth/v1/validator/sync_committee_contribution': (init) =>
      api.validator.produceSyncCommitteeContribution({ slot: 100, subcommitteeIndex: 1, beaconBlockRoot: headRoot }, init),
    '/eth/v3/validator/blocks/{slot}': (init) =>
      api.validator.produceBlockV3({ slot: 101, randaoReveal: reveal, graffiti: 'lodestar client test' }, init),
    '/eth/v2/validator/aggregate_attestation': (init) =>
      api.validator.getAggregatedAttestationV2({ attestationDataRoot: new Uint8Array(32).fill(0x11), slot: 100, committeeIndex: 0 }, init),
    '/eth/v1/beacon/pool/attestations': readOlder(older.poolAttestationsV1, {}),
    '/eth/v1/beacon/pool/attester_slashings': readOlder(older.poolAttesterSlashingsV1, {}),
    '/eth/v1/beacon/pool/proposer_slashings': (init) => api.beacon.getPoolProposerSlashings(init),
    '/eth/v1/beacon/pool/voluntary_exits': (init) => api.beacon.getPoolVoluntaryExits(init),
    '/eth/v1/beacon/pool/sync_committees': readOlder(older.poolSyncCommittees, {}),
    '/eth/v1/beacon/pool/bls_to_execution_changes': (init) => api.beacon.getPoolBLSToExecutionChanges(init),
    '/eth/v2/beacon/pool/attestations': (init) => api.beacon.getPoolAttestationsV2({}, init),
    '/eth/v2/beacon/pool/attester_slashings': (init) => api.beacon.getPoolAttesterSlashingsV2(init),
    '/eth/v2/debug/beacon/states/{state_id}': (init) => api.debug.getStateV2({ stateId: 'head' }, init),
    '/eth/v2/debug/beacon/heads': (init) => api.debug.getDebugChainHeadsV2(init),
    '/eth/v1/debug/fork_choice': (init) => api.debug.getDebugForkChoice(init),
  };

  const allowedGets = BEACON_ROUTES.filter((r) => r.method === 'GET' && r.template !== EVENTS_TEMPLATE).map((r) => r.template);
  t.same(
    Object.keys(reads).sort(),
    [...allowedGets].sort(),
    'one read for every GET path of the allowlist (the event stream is read below)',
  );
  t.ok(
    [...SSZ_PATHS].every((p) => allowedGets.includes(p)),
    'every SSZ path is allowlisted',
  );

  const values = new Map<string, unknown>();
  for (const [template, read] of Object.entries(reads)) {
    const wanted = SSZ_PATHS.has(template) ? WireFormat.ssz : WireFormat.json;
    const res = await read({ responseWireFormat: wanted });
    if (!res.ok) {
      t.fail(`${template}: ${res.status} ${(await res.errorBody()) ?? ''}`);
      continue;
    }
    await res.rawBody();
    // node/health answers with an empty body, which has no wire format.
    t.equal(res.wireFormat(), template === '/eth/v1/node/health' ? null : wanted, `${template}: answered in ${wanted} as asked`);
    try {
      values.set(template, res.value());
      t.pass(`${template}: the value decodes with Lodestar's types`);
    } catch (err) {
      t.fail(`${template}: ${String(err)}`);
    }
  }

  // The values are the chain's: SSZ block and state hash to the roots the node names for them.
  const block = values.get('/eth/v2/beacon/blocks/{block_id}') as { message: Parameters<typeof ssz.electra.BeaconBlock.hashTreeRoot>[0] };
  const root1 = (await api.beacon.getBlockRoot({ blockId: 1 })).value().root;
  t.same(ssz.electra.BeaconBlock.hashTreeRoot(block.message), root1, 'block 1 (SSZ) hashes to its root');
  t.equal(block.message.body.executionPayload.transactions.length, 1, 'and carries the transfer');
  const state = values.get('/eth/v2/debug/beacon/states/{state_id}') as Parameters<typeof ssz.electra.BeaconState.hashTreeRoot>[0];
  const stateRoot = (await api.beacon.getStateRoot({ stateId: 'head' })).value().root;
  t.same(ssz.electra.BeaconState.hashTreeRoot(state), stateRoot, 'the head state (SSZ) hashes to its root');
  t.same(state.blockRoots[99], (await api.beacon.getBlockRoot({ blockId: 99 })).value().root, 'the state holds the real block roots');
  t.equal(
    (values.get('/eth/v1/beacon/pool/voluntary_exits') as Array<{ message: { validatorIndex: number } }>)[0]?.message.validatorIndex,
    3,
    'the submitted exit reads back',
  );

  // GET /eth/v1/events: the client's own event stream, each event parsed by its type.
  const controller = new AbortController();
  t.teardown(() => controller.abort());
  const events: Array<{ type: string; slot: number }> = [];
  const errors: unknown[] = [];
  await api.events.eventstream({
    topics: [routes.events.EventType.head, routes.events.EventType.block],
    signal: controller.signal,
    onEvent: (e) => events.push({ type: e.type, slot: (e.message as { slot: number }).slot }),
    onError: (err) => errors.push(err),
  });
  const deadline = performance.now() + 15_000;
  while (!events.some((e) => e.type === 'head')) {
    if (performance.now() > deadline) throw new Error('no head event through the gateway within 15 s');
    await rpc(anvil.url, 'evm_mine');
    await new Promise((r) => setTimeout(r, 300));
  }
  controller.abort();
  t.same(errors, [], 'every event parsed');
  t.ok(
    events.some((e) => e.type === 'block') && events.every((e) => e.slot > 100),
    `head and block events of new slots (${events.length})`,
  );
});
