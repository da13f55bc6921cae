/**
 * Electra's SignedBeaconBlock and BeaconState as SSZ types, sized by the devnet's preset, field for
 * field in the consensus specs' order (the order is the encoding).
 */
import { PRESET } from './beacon-config.js';
import { bool, byteList, bytes, container, list, uint256, uint64, uint8, vector, type SszType } from './ssz.js';

const root = bytes(32);
const pubkey = bytes(48);
const signature = bytes(96);
const address = bytes(20);

const checkpoint = container([['epoch', uint64], ['root', root]]);
const fork = container([['previous_version', bytes(4)], ['current_version', bytes(4)], ['epoch', uint64]]);
const eth1Data = container([['deposit_root', root], ['deposit_count', uint64], ['block_hash', root]]);
const blockHeader = container([
  ['slot', uint64], ['proposer_index', uint64], ['parent_root', root], ['state_root', root], ['body_root', root],
]);
const signedBlockHeader = container([['message', blockHeader], ['signature', signature]]);
const attestationData = container([
  ['slot', uint64], ['index', uint64], ['beacon_block_root', root], ['source', checkpoint], ['target', checkpoint],
]);
const attestation = container([
  ['aggregation_bits', byteList], ['data', attestationData], ['signature', signature],
  ['committee_bits', bytes(Math.ceil(PRESET.MAX_COMMITTEES_PER_SLOT / 8))],
]);
const indexedAttestation = container([['attesting_indices', list(uint64)], ['data', attestationData], ['signature', signature]]);
const depositData = container([['pubkey', pubkey], ['withdrawal_credentials', root], ['amount', uint64], ['signature', signature]]);
const withdrawal = container([['index', uint64], ['validator_index', uint64], ['address', address], ['amount', uint64]]);

const payloadCommon: Array<readonly [string, SszType]> = [
  ['parent_hash', root], ['fee_recipient', address], ['state_root', root], ['receipts_root', root],
  ['logs_bloom', bytes(256)], ['prev_randao', root], ['block_number', uint64], ['gas_limit', uint64],
  ['gas_used', uint64], ['timestamp', uint64], ['extra_data', byteList], ['base_fee_per_gas', uint256],
  ['block_hash', root],
];
const executionPayload = container([
  ...payloadCommon, ['transactions', list(byteList)], ['withdrawals', list(withdrawal)],
  ['blob_gas_used', uint64], ['excess_blob_gas', uint64],
]);
const executionPayloadHeader = container([
  ...payloadCommon, ['transactions_root', root], ['withdrawals_root', root],
  ['blob_gas_used', uint64], ['excess_blob_gas', uint64],
]);

const body = container([
  ['randao_reveal', signature],
  ['eth1_data', eth1Data],
  ['graffiti', root],
  ['proposer_slashings', list(container([['signed_header_1', signedBlockHeader], ['signed_header_2', signedBlockHeader]]))],
  ['attester_slashings', list(container([['attestation_1', indexedAttestation], ['attestation_2', indexedAttestation]]))],
  ['attestations', list(attestation)],
  ['deposits', list(container([['proof', vector(root, 33)], ['data', depositData]]))],
  ['voluntary_exits', list(container([['message', container([['epoch', uint64], ['validator_index', uint64]])], ['signature', signature]]))],
  ['sync_aggregate', container([['sync_committee_bits', bytes(PRESET.SYNC_COMMITTEE_SIZE / 8)], ['sync_committee_signature', signature]])],
  ['execution_payload', executionPayload],
  ['bls_to_execution_changes', list(container([
    ['message', container([['validator_index', uint64], ['from_bls_pubkey', pubkey], ['to_execution_address', address]])],
    ['signature', signature],
  ]))],
  ['blob_kzg_commitments', list(bytes(48))],
  ['execution_requests', container([
    ['deposits', list(container([['pubkey', pubkey], ['withdrawal_credentials', root], ['amount', uint64], ['signature', signature], ['index', uint64]]))],
    ['withdrawals', list(container([['source_address', address], ['validator_pubkey', pubkey], ['amount', uint64]]))],
    ['consolidations', list(container([['source_address', address], ['source_pubkey', pubkey], ['target_pubkey', pubkey]]))],
  ])],
]);

export const signedBeaconBlock: SszType = container([
  ['message', container([['slot', uint64], ['proposer_index', uint64], ['parent_root', root], ['state_root', root], ['body', body]])],
  ['signature', signature],
]);

const validator = container([
  ['pubkey', pubkey], ['withdrawal_credentials', root], ['effective_balance', uint64], ['slashed', bool],
  ['activation_eligibility_epoch', uint64], ['activation_epoch', uint64], ['exit_epoch', uint64], ['withdrawable_epoch', uint64],
]);
const syncCommittee = container([['pubkeys', vector(pubkey, PRESET.SYNC_COMMITTEE_SIZE)], ['aggregate_pubkey', pubkey]]);

export const beaconState: SszType = container([
  ['genesis_time', uint64],
  ['genesis_validators_root', root],
  ['slot', uint64],
  ['fork', fork],
  ['latest_block_header', blockHeader],
  ['block_roots', vector(root, PRESET.SLOTS_PER_HISTORICAL_ROOT)],
  ['state_roots', vector(root, PRESET.SLOTS_PER_HISTORICAL_ROOT)],
  ['historical_roots', list(root)],
  ['eth1_data', eth1Data],
  ['eth1_data_votes', list(eth1Data)],
  ['eth1_deposit_index', uint64],
  ['validators', list(validator)],
  ['balances', list(uint64)],
  ['randao_mixes', vector(root, PRESET.EPOCHS_PER_HISTORICAL_VECTOR)],
  ['slashings', vector(uint64, PRESET.EPOCHS_PER_SLASHINGS_VECTOR)],
  ['previous_epoch_participation', list(uint8)],
  ['current_epoch_participation', list(uint8)],
  ['justification_bits', bytes(1)],
  ['previous_justified_checkpoint', checkpoint],
  ['current_justified_checkpoint', checkpoint],
  ['finalized_checkpoint', checkpoint],
  ['inactivity_scores', list(uint64)],
  ['current_sync_committee', syncCommittee],
  ['next_sync_committee', syncCommittee],
  ['latest_execution_payload_header', executionPayloadHeader],
  ['next_withdrawal_index', uint64],
  ['next_withdrawal_validator_index', uint64],
  ['historical_summaries', list(container([['block_summary_root', root], ['state_summary_root', root]]))],
  ['deposit_requests_start_index', uint64],
  ['deposit_balance_to_consume', uint64],
  ['exit_balance_to_consume', uint64],
  ['earliest_exit_epoch', uint64],
  ['consolidation_balance_to_consume', uint64],
  ['earliest_consolidation_epoch', uint64],
  ['pending_deposits', list(container([['pubkey', pubkey], ['withdrawal_credentials', root], ['amount', uint64], ['signature', signature], ['slot', uint64]]))],
  ['pending_partial_withdrawals', list(container([['validator_index', uint64], ['amount', uint64], ['withdrawable_epoch', uint64]]))],
  ['pending_consolidations', list(container([['source_index', uint64], ['target_index', uint64]]))],
]);
