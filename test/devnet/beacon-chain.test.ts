/**
 * The devnet's beacon chain over a long run of real anvil blocks: it serves the newest historySlots slots
 * (and genesis) and keeps no more than they need, so its roots, root index and state trees stop growing
 * however many slots are sealed, while the oldest slot served still rebuilds to the state root it was
 * sealed with.
 */
import t from 'tap';
import { type BeaconChain, CHECKPOINT_SLOTS, createBeaconChain, type SlotBlock } from '../../src/devnet/beacon/beacon-chain.js';
import { createEpochs } from '../../src/devnet/beacon/epochs.js';
import { createExecutionClient } from '../../src/devnet/beacon/execution-client.js';
import { toHex } from '../../src/devnet/beacon/hex.js';
import { createValidatorSet } from '../../src/devnet/beacon/validator-set.js';
import { result } from '../support/dev-chain.js';
import { anvilFor } from '../support/gateway.js';

const SLOTS = 1000;
const HISTORY = 64;
const SLOTS_PER_EPOCH = 8;
const KEEP_STATES = 16;

t.test(`${SLOTS} slots with a history of ${HISTORY}: what is held stops growing; the oldest slot served still rebuilds`, async (t) => {
  const node = await anvilFor(t);
  await result(node.url, 'anvil_mine', [`0x${SLOTS.toString(16)}`]);
  const stop = new AbortController();
  t.teardown(() => stop.abort());
  const client = createExecutionClient(node.url, stop.signal);
  const epochs = createEpochs(SLOTS_PER_EPOCH);
  const chain: BeaconChain = createBeaconChain({
    epochs,
    validators: createValidatorSet(epochs),
    rawTransactions: (hashes) => client.rawTransactions([...hashes]),
    keepStates: KEEP_STATES,
    historySlots: HISTORY,
  });
  const sealed: SlotBlock[] = [];
  let most = { roots: 0, indexed: 0, states: 0 };
  for (let from = 0; from <= SLOTS; from += 200) {
    for (const exec of await client.blocks(from, Math.min(SLOTS, from + 199))) {
      sealed.push(await chain.seal(exec, sealed.at(-1)));
      const held = chain.held();
      most = {
        roots: Math.max(most.roots, held.roots),
        indexed: Math.max(most.indexed, held.indexed),
        states: Math.max(most.states, held.states),
      };
    }
  }
  t.equal(sealed.length, SLOTS + 1, 'every block sealed');
  // Roots from a checkpoint (at most CHECKPOINT_SLOTS) below the oldest slot served, and genesis'.
  const rootsBound = HISTORY + CHECKPOINT_SLOTS + 1;
  t.ok(most.roots <= rootsBound, `at most ${most.roots} slots' roots held at once (bound ${rootsBound}, of ${SLOTS + 1} sealed)`);
  t.ok(most.indexed <= 2 * rootsBound, `at most ${most.indexed} roots indexed`);
  const statesBound = KEEP_STATES + Math.ceil(HISTORY / CHECKPOINT_SLOTS) + 2;
  t.ok(most.states <= statesBound, `at most ${most.states} state trees (bound ${statesBound})`);

  const oldest = sealed[SLOTS - HISTORY + 1]!;
  const gone = sealed[SLOTS - HISTORY]!;
  t.equal(chain.slotOfRoot(oldest.root), oldest.slot, 'the oldest slot served is found by its root');
  t.equal(chain.slotOfStateRoot(oldest.stateRoot), oldest.slot, 'and by its state root');
  t.same(chain.known(oldest.execution), oldest, 'and by its execution block');
  const state = await chain.state(oldest);
  t.equal(toHex(state.hashTreeRoot()), oldest.stateRoot, 'its state, rebuilt from a kept one, has the root it was sealed with');
  t.equal((await chain.signedBlock(oldest)).message.stateRoot.length, 32, 'its block is built');
  t.equal(chain.slotOfRoot(gone.root), undefined, 'the slot before it is not found by root');
  t.equal(chain.slotOfStateRoot(gone.stateRoot), undefined, 'nor by state root');
  t.equal(chain.known(gone.execution), undefined, 'nor by its execution block');
  t.same(chain.known(sealed[0]!.execution), sealed[0], 'genesis stays');
  t.equal(chain.slotOfRoot(sealed[0]!.root), 0);
});
