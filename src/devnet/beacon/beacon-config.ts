/**
 * The devnet's consensus configuration: one fork (Electra, the consensus partner of anvil's default
 * Prague), minimal-preset sizes so states stay small, and the slot length the followed chain
 * actually keeps. Everything `/eth/v1/config/*` answers and every size the SSZ types use comes from here.
 */

/** The fork every slot of the devnet is in; anvil's default hardfork is Prague, paired with Electra. */
export const FORK = 'electra';

/** Sizes shared by the JSON shapes and the SSZ types (minimal preset values, except SLOTS_PER_EPOCH). */
export const PRESET = {
  MAX_COMMITTEES_PER_SLOT: 4,
  TARGET_COMMITTEE_SIZE: 4,
  MAX_VALIDATORS_PER_COMMITTEE: 2048,
  SYNC_COMMITTEE_SIZE: 32,
  SYNC_COMMITTEE_SUBNET_COUNT: 4,
  EPOCHS_PER_SYNC_COMMITTEE_PERIOD: 8,
  SLOTS_PER_HISTORICAL_ROOT: 64,
  EPOCHS_PER_HISTORICAL_VECTOR: 64,
  EPOCHS_PER_SLASHINGS_VECTOR: 64,
  TARGET_AGGREGATORS_PER_COMMITTEE: 16,
} as const;

/** How many validators the devnet has; all active from genesis with 32 ETH. */
export const VALIDATOR_COUNT = 64;
export const MAX_EFFECTIVE_BALANCE_GWEI = 32_000_000_000;
export const FAR_FUTURE_EPOCH = '18446744073709551615';
export const DEPOSIT_CONTRACT_ADDRESS = '0x00000000219ab540356cbb839cbe05303d7705fa';

const FORK_NAMES = ['genesis', 'altair', 'bellatrix', 'capella', 'deneb', 'electra'] as const;

/** Fork versions `0xNN007a69`: the fork's ordinal, then 31337 (anvil's chain id) so they are unmistakably devnet's. */
export function forkVersion(name: (typeof FORK_NAMES)[number] | 'fulu'): string {
  const ordinal = name === 'fulu' ? FORK_NAMES.length : FORK_NAMES.indexOf(name);
  return '0x' + ordinal.toString(16).padStart(2, '0') + '007a69';
}

/** The fork schedule: every fork up to Electra at epoch 0. */
export function forkSchedule(): Array<{ previous_version: string; current_version: string; epoch: string }> {
  return FORK_NAMES.map((name, i) => ({
    previous_version: forkVersion(FORK_NAMES[Math.max(0, i - 1)] ?? 'genesis'),
    current_version: forkVersion(name),
    epoch: '0',
  }));
}

/** The state's `fork` field and `/states/{id}/fork`. */
export function currentFork(): { previous_version: string; current_version: string; epoch: string } {
  return { previous_version: forkVersion('deneb'), current_version: forkVersion('electra'), epoch: '0' };
}

export interface SpecInputs {
  slotsPerEpoch: number;
  secondsPerSlot: number;
  chainId: number;
  genesisTime: number;
}

/** `/eth/v1/config/spec`: every value a string, as the API serves them. */
export function specValues(s: SpecInputs): Record<string, string> {
  const values: Record<string, string | number> = {
    CONFIG_NAME: 'chaingate-devnet',
    PRESET_BASE: 'minimal',
    SECONDS_PER_SLOT: s.secondsPerSlot,
    SLOTS_PER_EPOCH: s.slotsPerEpoch,
    ...PRESET,
    SHUFFLE_ROUND_COUNT: 10,
    MIN_GENESIS_ACTIVE_VALIDATOR_COUNT: VALIDATOR_COUNT,
    MIN_GENESIS_TIME: s.genesisTime,
    GENESIS_DELAY: 0,
    GENESIS_FORK_VERSION: forkVersion('genesis'),
    ALTAIR_FORK_VERSION: forkVersion('altair'),
    ALTAIR_FORK_EPOCH: 0,
    BELLATRIX_FORK_VERSION: forkVersion('bellatrix'),
    BELLATRIX_FORK_EPOCH: 0,
    CAPELLA_FORK_VERSION: forkVersion('capella'),
    CAPELLA_FORK_EPOCH: 0,
    DENEB_FORK_VERSION: forkVersion('deneb'),
    DENEB_FORK_EPOCH: 0,
    ELECTRA_FORK_VERSION: forkVersion('electra'),
    ELECTRA_FORK_EPOCH: 0,
    FULU_FORK_VERSION: forkVersion('fulu'),
    FULU_FORK_EPOCH: FAR_FUTURE_EPOCH,
    TERMINAL_TOTAL_DIFFICULTY: 0,
    MIN_ATTESTATION_INCLUSION_DELAY: 1,
    MIN_SEED_LOOKAHEAD: 1,
    MAX_SEED_LOOKAHEAD: 4,
    MIN_EPOCHS_TO_INACTIVITY_PENALTY: 4,
    ETH1_FOLLOW_DISTANCE: 16,
    EPOCHS_PER_ETH1_VOTING_PERIOD: 4,
    MIN_VALIDATOR_WITHDRAWABILITY_DELAY: 256,
    SHARD_COMMITTEE_PERIOD: 64,
    MIN_DEPOSIT_AMOUNT: 1_000_000_000,
    MAX_EFFECTIVE_BALANCE: MAX_EFFECTIVE_BALANCE_GWEI,
    MAX_EFFECTIVE_BALANCE_ELECTRA: 2_048_000_000_000,
    MIN_ACTIVATION_BALANCE: MAX_EFFECTIVE_BALANCE_GWEI,
    EFFECTIVE_BALANCE_INCREMENT: 1_000_000_000,
    EJECTION_BALANCE: 16_000_000_000,
    MIN_PER_EPOCH_CHURN_LIMIT: 2,
    CHURN_LIMIT_QUOTIENT: 32,
    MAX_PER_EPOCH_ACTIVATION_CHURN_LIMIT: 4,
    MAX_PROPOSER_SLASHINGS: 16,
    MAX_ATTESTER_SLASHINGS_ELECTRA: 1,
    MAX_ATTESTATIONS_ELECTRA: 8,
    MAX_DEPOSITS: 16,
    MAX_VOLUNTARY_EXITS: 16,
    MAX_BLS_TO_EXECUTION_CHANGES: 16,
    MAX_WITHDRAWALS_PER_PAYLOAD: 4,
    MAX_BLOB_COMMITMENTS_PER_BLOCK: 4096,
    MAX_BLOBS_PER_BLOCK_ELECTRA: 9,
    BLOB_SIDECAR_SUBNET_COUNT_ELECTRA: 9,
    MAX_REQUEST_BLOCKS_DENEB: 128,
    MIN_EPOCHS_FOR_BLOCK_REQUESTS: 272,
    MIN_EPOCHS_FOR_BLOB_SIDECARS_REQUESTS: 4096,
    DEPOSIT_CHAIN_ID: s.chainId,
    DEPOSIT_NETWORK_ID: s.chainId,
    DEPOSIT_CONTRACT_ADDRESS,
    BLS_WITHDRAWAL_PREFIX: '0x00',
    ETH1_ADDRESS_WITHDRAWAL_PREFIX: '0x01',
    COMPOUNDING_WITHDRAWAL_PREFIX: '0x02',
    DOMAIN_BEACON_PROPOSER: '0x00000000',
    DOMAIN_BEACON_ATTESTER: '0x01000000',
    DOMAIN_RANDAO: '0x02000000',
    DOMAIN_DEPOSIT: '0x03000000',
    DOMAIN_VOLUNTARY_EXIT: '0x04000000',
    DOMAIN_SELECTION_PROOF: '0x05000000',
    DOMAIN_AGGREGATE_AND_PROOF: '0x06000000',
    DOMAIN_SYNC_COMMITTEE: '0x07000000',
    DOMAIN_SYNC_COMMITTEE_SELECTION_PROOF: '0x08000000',
    DOMAIN_CONTRIBUTION_AND_PROOF: '0x09000000',
    DOMAIN_BLS_TO_EXECUTION_CHANGE: '0x0a000000',
    DOMAIN_APPLICATION_MASK: '0x00000001',
  };
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, String(v)]));
}
