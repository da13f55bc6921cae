/**
 * The devnet's consensus configuration, in Lodestar's own terms: the preset is whatever
 * `@lodestar/params` has active (mainnet unless LODESTAR_PRESET says otherwise, so a stock client
 * decodes the node's SSZ), the chain config is `@lodestar/config`'s with every fork up to Electra (the
 * consensus partner of anvil's default Prague) at epoch 0, and `/eth/v1/config/*` is rendered from
 * those same objects, so what the node says it runs is what its types encode.
 */
import { chainConfigToJson, defaultChainConfig, specValuesToJson, type ChainConfig } from '@lodestar/config';
import * as params from '@lodestar/params';
import { ssz } from '@lodestar/types';

/** The fork every slot of the devnet is in. */
export const FORK = params.ForkName.electra;

/** How many validators the devnet has; all active from genesis with 32 ETH. */
export const VALIDATOR_COUNT = 64;
export const DEPOSIT_CONTRACT_ADDRESS = '0x00000000219ab540356cbb839cbe05303d7705fa';

const SCHEDULED = ['phase0', 'altair', 'bellatrix', 'capella', 'deneb', 'electra'] as const;

/** Fork versions `0xNN007a69`: the fork's ordinal, then 31337 (anvil's chain id) so they are unmistakably the devnet's. */
function forkVersion(ordinal: number): Uint8Array {
  return Uint8Array.from([ordinal, 0x00, 0x7a, 0x69]);
}

export interface ChainInputs {
  chainId: number;
  /** The followed chain's own slot length, in seconds. */
  secondsPerSlot: number;
  /** Unix seconds of anvil's block 0. */
  genesisTime: number;
}

/** The devnet's chain config: Lodestar's defaults, the devnet's name, fork versions and epochs, deposit chain and slot length. */
export function devnetChainConfig(c: ChainInputs): ChainConfig {
  return {
    ...defaultChainConfig,
    CONFIG_NAME: 'chaingate-devnet',
    PRESET_BASE: params.ACTIVE_PRESET,
    MIN_GENESIS_ACTIVE_VALIDATOR_COUNT: VALIDATOR_COUNT,
    MIN_GENESIS_TIME: c.genesisTime,
    GENESIS_DELAY: 0,
    GENESIS_FORK_VERSION: forkVersion(0),
    ALTAIR_FORK_VERSION: forkVersion(1),
    ALTAIR_FORK_EPOCH: 0,
    BELLATRIX_FORK_VERSION: forkVersion(2),
    BELLATRIX_FORK_EPOCH: 0,
    CAPELLA_FORK_VERSION: forkVersion(3),
    CAPELLA_FORK_EPOCH: 0,
    DENEB_FORK_VERSION: forkVersion(4),
    DENEB_FORK_EPOCH: 0,
    ELECTRA_FORK_VERSION: forkVersion(5),
    ELECTRA_FORK_EPOCH: 0,
    FULU_FORK_VERSION: forkVersion(6),
    FULU_FORK_EPOCH: Infinity,
    GLOAS_FORK_VERSION: forkVersion(7),
    GLOAS_FORK_EPOCH: Infinity,
    HEZE_FORK_VERSION: forkVersion(8),
    HEZE_FORK_EPOCH: Infinity,
    SECONDS_PER_SLOT: c.secondsPerSlot,
    SLOT_DURATION_MS: c.secondsPerSlot * 1000,
    DEPOSIT_CHAIN_ID: c.chainId,
    DEPOSIT_NETWORK_ID: c.chainId,
    DEPOSIT_CONTRACT_ADDRESS: Buffer.from(DEPOSIT_CONTRACT_ADDRESS.slice(2), 'hex'),
  };
}

/** The fork schedule as `/eth/v1/config/fork_schedule` lists it: every fork up to Electra, all at epoch 0. */
export function forkSchedule(): unknown[] {
  return SCHEDULED.map((_, i) =>
    ssz.phase0.Fork.toJson({ previousVersion: forkVersion(Math.max(0, i - 1)), currentVersion: forkVersion(i), epoch: 0 }),
  );
}

/** The state's `fork` field and `/states/{id}/fork`. */
export const CURRENT_FORK = { previousVersion: forkVersion(4), currentVersion: forkVersion(5), epoch: 0 };

export const GENESIS_FORK_VERSION = forkVersion(0);

/** `/eth/v1/config/spec`: the chain config, the active preset (SLOTS_PER_EPOCH as the node keeps it) and the constants clients read. */
export function specJson(c: ChainInputs, slotsPerEpoch: number): Record<string, unknown> {
  return {
    ...chainConfigToJson(devnetChainConfig(c)),
    ...params.presetToJson({ ...params.activePreset, SLOTS_PER_EPOCH: slotsPerEpoch }),
    ...specValuesToJson({
      DEPOSIT_CONTRACT_TREE_DEPTH: params.DEPOSIT_CONTRACT_TREE_DEPTH,
      TARGET_AGGREGATORS_PER_COMMITTEE: params.TARGET_AGGREGATORS_PER_COMMITTEE,
      TARGET_AGGREGATORS_PER_SYNC_SUBCOMMITTEE: params.TARGET_AGGREGATORS_PER_SYNC_SUBCOMMITTEE,
      SYNC_COMMITTEE_SUBNET_COUNT: params.SYNC_COMMITTEE_SUBNET_COUNT,
      BLS_WITHDRAWAL_PREFIX: Uint8Array.of(params.BLS_WITHDRAWAL_PREFIX),
      ETH1_ADDRESS_WITHDRAWAL_PREFIX: Uint8Array.of(params.ETH1_ADDRESS_WITHDRAWAL_PREFIX),
      COMPOUNDING_WITHDRAWAL_PREFIX: Uint8Array.of(params.COMPOUNDING_WITHDRAWAL_PREFIX),
      DOMAIN_BEACON_PROPOSER: params.DOMAIN_BEACON_PROPOSER,
      DOMAIN_BEACON_ATTESTER: params.DOMAIN_BEACON_ATTESTER,
      DOMAIN_RANDAO: params.DOMAIN_RANDAO,
      DOMAIN_DEPOSIT: params.DOMAIN_DEPOSIT,
      DOMAIN_VOLUNTARY_EXIT: params.DOMAIN_VOLUNTARY_EXIT,
      DOMAIN_SELECTION_PROOF: params.DOMAIN_SELECTION_PROOF,
      DOMAIN_AGGREGATE_AND_PROOF: params.DOMAIN_AGGREGATE_AND_PROOF,
      DOMAIN_SYNC_COMMITTEE: params.DOMAIN_SYNC_COMMITTEE,
      DOMAIN_SYNC_COMMITTEE_SELECTION_PROOF: params.DOMAIN_SYNC_COMMITTEE_SELECTION_PROOF,
      DOMAIN_CONTRIBUTION_AND_PROOF: params.DOMAIN_CONTRIBUTION_AND_PROOF,
      DOMAIN_BLS_TO_EXECUTION_CHANGE: params.DOMAIN_BLS_TO_EXECUTION_CHANGE,
      DOMAIN_APPLICATION_MASK: params.DOMAIN_APPLICATION_MASK,
    }),
  };
}
