/**
 * The devnet's beacon node against a real anvil: it follows the chain slot for block, answers every
 * path of the Beacon allowlist in the API's shapes, resolves ids of every form, serves SSZ that
 * Lodestar's types decode, gives roots that are the hash_tree_root of what it serves, and streams
 * head/block/finalized_checkpoint/chain_reorg events as anvil mines and reverts.
 */
import t, { type Test } from 'tap';
import { ssz } from '@lodestar/types';
import { startAnvil, type AnvilNode } from '../../src/devnet/anvil.js';
import { startBeaconNode, type BeaconNode } from '../../src/devnet/beacon/beacon-node.js';
import { minedReceipt } from '../support/dev-chain.js';

interface Block {
  number: string;
  hash: string;
  parentHash: string;
  stateRoot: string;
  timestamp: string;
}

async function rpc<T>(anvil: AnvilNode, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(anvil.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

const blockAt = (anvil: AnvilNode, n: number | 'latest'): Promise<Block> =>
  rpc<Block>(anvil, 'eth_getBlockByNumber', [n === 'latest' ? n : '0x' + n.toString(16), false]);

/** Waits for `cond`; a wait that passes takes what it takes, so the bound is wide (a busy CI machine). */
async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A transfer, mined in a block of its own. Anvil answers eth_sendTransaction before its automine has run: an
 * anvil_mine sent at once can take the transaction into its first block, and the chain ends a block short
 * (seen: 3 runs in 600 of the mines below, three side by side, all at head 67 of the 68 awaited).
 */
async function transfer(anvil: AnvilNode): Promise<void> {
  const hash = await rpc<string>(anvil, 'eth_sendTransaction', [
    { from: '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266', to: '0x70997970c51812dc3a010c7d01b50e0d17dc79c8', value: '0x1' },
  ]);
  await minedReceipt(anvil.url, hash);
}

/** Waits for the node's head to reach `slot`, saying where it stopped if it does not. */
const headAt = (node: BeaconNode, slot: number): Promise<void> =>
  until(`head slot ${slot}`, () => node.headSlot() === slot).catch((e: Error) => {
    throw new Error(`${e.message} (the node's head is at slot ${node.headSlot()})`);
  });

async function devnet(t: Test, slotsPerEpoch?: number): Promise<{ anvil: AnvilNode; node: BeaconNode }> {
  const anvil = await startAnvil();
  t.teardown(() => anvil.stop());
  const node = await startBeaconNode({ executionUrl: anvil.url, pollMs: 40, ...(slotsPerEpoch ? { slotsPerEpoch } : {}) });
  t.teardown(() => node.stop());
  return { anvil, node };
}

/** Parsed answers are walked by path in the assertions; typing each endpoint's shape would restate the API. */
// biome-ignore lint/suspicious/noExplicitAny: see above; the answers are checked by value, not by type
type Json = any;

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: Json;
}

async function call(node: BeaconNode, path: string, init: { method?: string; body?: unknown; accept?: string } = {}): Promise<Answer> {
  const res = await fetch(node.url + path, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(init.accept ? { accept: init.accept } : {}),
    },
    ...(init.body === undefined ? {} : { body: typeof init.body === 'string' ? init.body : JSON.stringify(init.body) }),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

interface Stream {
  events: Array<{ event: string; data: Record<string, unknown> }>;
  /** Everything received, comments included. */
  raw: string;
  ended: Promise<void>;
}

async function openEvents(t: Test, node: BeaconNode, query: string): Promise<Stream> {
  const ac = new AbortController();
  t.teardown(() => ac.abort());
  const res = await fetch(`${node.url}/eth/v1/events?${query}`, { signal: ac.signal });
  t.equal(res.status, 200, `events?${query} opens`);
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const stream: Stream = { events: [], raw: '', ended: Promise.resolve() };
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  stream.ended = (async () => {
    let buffer = '';
    for (;;) {
      const chunk = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (chunk.done) return;
      const text = decoder.decode(chunk.value, { stream: true });
      stream.raw += text;
      buffer += text;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(frame)?.[1];
        const data = /^data: (.*)$/m.exec(frame)?.[1];
        if (event && data) stream.events.push({ event, data: JSON.parse(data) as Record<string, unknown> });
      }
    }
  })();
  return stream;
}

const RANDAO_REVEAL = '0x' + 'ab'.repeat(96);

/** The node's block root and state root of `slot`, by id. */
const rootOf = async (node: BeaconNode, slot: number | string): Promise<string> =>
  (await call(node, `/eth/v1/beacon/blocks/${slot}/root`)).json.data.root;
const stateRootOf = async (node: BeaconNode, slot: number | string): Promise<string> =>
  (await call(node, `/eth/v1/beacon/states/${slot}/root`)).json.data.root;
const hex = (b: Uint8Array): string => '0x' + Buffer.from(b).toString('hex');

t.test('follows anvil and answers every listed path in the API shapes', async (t) => {
  const { anvil, node } = await devnet(t);
  await rpc(anvil, 'anvil_mine', ['0x64']);
  await headAt(node, 100);
  const latest = await blockAt(anvil, 'latest');
  const genesis = await blockAt(anvil, 0);
  t.equal(Number(latest.number), node.headSlot(), 'head slot is anvil block number');

  const hash = (n: number): Promise<string> => rootOf(node, n);
  const slot = 100;
  const epoch = 3;
  const dataRoot = '0x' + '11'.repeat(32);
  type Case = [method: 'GET' | 'POST', path: string, body?: unknown];
  const cases: Case[] = [
    ['GET', '/eth/v1/node/version'],
    ['GET', '/eth/v1/node/syncing'],
    ['GET', '/eth/v1/node/identity'],
    ['GET', '/eth/v1/node/peers'],
    ['GET', '/eth/v1/node/peer_count'],
    ['GET', '/eth/v1/beacon/genesis'],
    ['GET', '/eth/v1/beacon/headers'],
    ['GET', '/eth/v1/beacon/headers/head'],
    ['GET', '/eth/v2/beacon/blocks/head'],
    ['GET', '/eth/v1/beacon/blocks/head/root'],
    ['GET', '/eth/v1/beacon/blocks/head/attestations'],
    ['GET', '/eth/v2/beacon/blocks/head/attestations'],
    ['GET', '/eth/v1/beacon/blob_sidecars/head'],
    ['GET', '/eth/v1/beacon/blobs/head'],
    ['GET', '/eth/v1/beacon/deposit_snapshot'],
    ...['root', 'fork', 'finality_checkpoints', 'validators', 'validator_balances', 'committees', 'sync_committees', 'randao'].map(
      (p): Case => ['GET', `/eth/v1/beacon/states/head/${p}`],
    ),
    ['GET', '/eth/v1/beacon/states/head/validators/0'],
    ['POST', '/eth/v1/beacon/states/head/validators', { ids: ['1', '2'] }],
    ['POST', '/eth/v1/beacon/states/head/validator_balances', ['1', '2']],
    ['GET', '/eth/v1/config/spec'],
    ['GET', '/eth/v1/config/fork_schedule'],
    ['GET', '/eth/v1/config/deposit_contract'],
    ['POST', `/eth/v1/validator/duties/attester/${epoch}`, Array.from({ length: 64 }, (_, i) => String(i))],
    ['GET', `/eth/v1/validator/duties/attester/${epoch}?index=0,1,2&index=3`],
    ['GET', `/eth/v1/validator/duties/proposer/${epoch}`],
    ['POST', `/eth/v1/validator/duties/sync/${epoch}`, Array.from({ length: 64 }, (_, i) => String(i))],
    ['GET', `/eth/v1/validator/attestation_data?slot=${slot}&committee_index=0`],
    ['GET', `/eth/v1/validator/aggregate_attestation?attestation_data_root=${dataRoot}&slot=${slot}`],
    ['GET', `/eth/v2/validator/aggregate_attestation?attestation_data_root=${dataRoot}&slot=${slot}&committee_index=0`],
    ['GET', `/eth/v1/validator/sync_committee_contribution?slot=${slot}&subcommittee_index=1&beacon_block_root=${latest.hash}`],
    ['GET', `/eth/v3/validator/blocks/${slot + 1}?randao_reveal=${RANDAO_REVEAL}`],
    ...['attestations', 'attester_slashings', 'proposer_slashings', 'voluntary_exits', 'sync_committees', 'bls_to_execution_changes'].map(
      (p): Case => ['GET', `/eth/v1/beacon/pool/${p}`],
    ),
    ['GET', '/eth/v2/beacon/pool/attestations'],
    ['GET', '/eth/v2/beacon/pool/attester_slashings'],
    ['GET', '/eth/v2/debug/beacon/states/head'],
    ['GET', '/eth/v2/debug/beacon/heads'],
    ['GET', '/eth/v1/debug/fork_choice'],
  ];
  const versioned =
    /\/eth\/v2\/beacon\/blocks\/|\/eth\/v2\/.*attestations|blob_sidecars|\/eth\/v2\/debug\/beacon\/states|\/eth\/v3\/|\/eth\/v2\/beacon\/pool\/|\/eth\/v2\/validator\/aggregate/;
  const answers = new Map<string, Answer>();
  for (const [method, path, body] of cases) {
    const a = await call(node, path, { method, body });
    answers.set(`${method} ${path}`, a);
    if (a.status !== 200) {
      t.fail(`${method} ${path}: ${a.status} ${a.text}`);
      continue;
    }
    t.match(a.headers.get('content-type'), /^application\/json/, `${path} is JSON`);
    const hasData = path === '/eth/v1/debug/fork_choice' ? 'fork_choice_nodes' in a.json : 'data' in a.json;
    t.ok(hasData, `${path} has its payload wrapper`);
    if (versioned.test(path)) {
      t.equal(a.json.version, 'electra', `${path} names its fork`);
      t.equal(a.headers.get('eth-consensus-version'), 'electra', `${path} has Eth-Consensus-Version`);
    }
  }
  const get = (path: string): Json => answers.get(`GET ${path}`)?.json;
  const posted = (path: string): Json => answers.get(`POST ${path}`)?.json;

  const health = await call(node, '/eth/v1/node/health');
  t.same([health.status, health.text], [200, ''], 'health: 200 with an empty body');

  t.equal(get('/eth/v1/beacon/genesis').data.genesis_time, String(Number(genesis.timestamp)), 'genesis_time is block 0 timestamp');
  const header = get('/eth/v1/beacon/headers/head').data;
  t.same(
    [header.header.message.slot, header.header.message.parent_root, header.header.message.state_root],
    ['100', await hash(99), await stateRootOf(node, 100)],
    'head header: slot, the parent block root and the state root the node names',
  );
  t.same(get('/eth/v1/beacon/headers').data, [header], 'headers without a query is the head header');
  const block = get('/eth/v2/beacon/blocks/head').data.message;
  t.same([block.slot, block.body.execution_payload.block_hash, block.body.execution_payload.block_number], ['100', latest.hash, '100']);
  t.equal(block.proposer_index, header.header.message.proposer_index, 'block and header name one proposer');
  t.equal(block.body.attestations[0].data.slot, '99', 'the block carries the attestation for the slot before');
  t.equal(get('/eth/v1/beacon/blocks/head/root').data.root, header.root);
  t.equal(
    get('/eth/v2/beacon/blocks/head').data.message.state_root,
    get('/eth/v1/beacon/states/head/root').data.root,
    'the block names its state',
  );

  const fc = get('/eth/v1/beacon/states/head/finality_checkpoints').data;
  t.same(
    [fc.finalized, fc.current_justified],
    [
      { epoch: '1', root: await hash(32) },
      { epoch: '2', root: await hash(64) },
    ],
    'finalized is the start of epoch − 2, justified of epoch − 1',
  );
  t.equal(get('/eth/v1/beacon/states/head/finality_checkpoints').finalized, false, 'head state is not finalized');
  t.same(get('/eth/v2/debug/beacon/states/head').data.finalized_checkpoint, fc.finalized, 'finality is what the state holds');

  const validators = get('/eth/v1/beacon/states/head/validators').data;
  t.equal(validators.length, 64);
  t.match(validators[5], { index: '5', status: 'active_ongoing', validator: { pubkey: /^0x[0-9a-f]{96}$/, slashed: false } });
  t.same(validators.map((v: { index: string }) => v.index).slice(0, 3), ['0', '1', '2'], 'validators in index order');
  t.equal(get('/eth/v1/beacon/states/head/validator_balances').data.length, 64);
  t.same(validators[0], get('/eth/v1/beacon/states/head/validators/0').data, 'one validator equals its list entry');
  t.same(
    (await call(node, '/eth/v1/beacon/states/head/validators', { method: 'POST', body: { ids: ['1', '2'] } })).json.data.map(
      (v: { index: string }) => v.index,
    ),
    ['1', '2'],
    'POST validators honours ids',
  );
  t.same(
    (await call(node, '/eth/v1/beacon/states/head/validator_balances', { method: 'POST', body: ['2', '1'] })).json.data.map(
      (v: { index: string }) => v.index,
    ),
    ['1', '2'],
  );
  const byQuery = await call(node, `/eth/v1/beacon/states/head/validators?id=1,2&id=${validators[3].validator.pubkey}`);
  t.same(
    byQuery.json.data.map((v: { index: string }) => v.index),
    ['1', '2', '3'],
    'validators?id= takes lists, repeats and pubkeys',
  );
  t.same((await call(node, '/eth/v1/beacon/states/head/validators?status=exited')).json.data, [], 'status filter');
  t.equal(
    (await call(node, `/eth/v1/beacon/states/head/validators/${validators[7].validator.pubkey}`)).json.data.index,
    '7',
    'validator by pubkey',
  );

  const committees = get('/eth/v1/beacon/states/head/committees').data as Array<{ slot: string; validators: string[] }>;
  t.equal(committees.length, 32, 'one committee per slot of the epoch');
  t.same(
    committees
      .flatMap((c) => c.validators)
      .map(Number)
      .sort((a, b) => a - b),
    Array.from({ length: 64 }, (_, i) => i),
    'each validator attests once per epoch',
  );
  const attester = posted(`/eth/v1/validator/duties/attester/${epoch}`);
  t.equal(attester.data.length, 64);
  for (const d of attester.data as Array<{ validator_index: string; slot: string; validator_committee_index: string }>) {
    const c = committees.find((x) => x.slot === d.slot);
    if (c?.validators[Number(d.validator_committee_index)] !== d.validator_index)
      t.fail(`attester duty of ${d.validator_index} disagrees with committees`);
  }
  t.equal(attester.dependent_root, await hash(63), 'attester dependent root: the block before epoch − 1 starts');
  const byGet = get(`/eth/v1/validator/duties/attester/${epoch}?index=0,1,2&index=3`);
  t.same(
    byGet,
    { ...attester, data: attester.data.filter((d: { validator_index: string }) => Number(d.validator_index) < 4) },
    'attester duties by GET ?index= (lists and repeats) are the POST answer for those indices',
  );
  const proposer = get(`/eth/v1/validator/duties/proposer/${epoch}`);
  t.same(
    proposer.data.map((d: { slot: string }) => d.slot),
    Array.from({ length: 32 }, (_, i) => String(96 + i)),
  );
  t.equal(proposer.data[4].validator_index, header.header.message.proposer_index, 'proposer duty for slot 100 names the header proposer');
  t.equal(proposer.dependent_root, await hash(95));
  const sync = posted(`/eth/v1/validator/duties/sync/${epoch}`).data as Array<{ validator_sync_committee_indices: string[] }>;
  t.equal(sync.flatMap((d) => d.validator_sync_committee_indices).length, 512, "the sync committee has the preset's 512 seats");
  t.equal(get('/eth/v1/beacon/states/head/sync_committees').data.validators.length, 512);
  t.match(get('/eth/v1/beacon/states/head/randao').data.randao, /^0x[0-9a-f]{64}$/);

  const spec = get('/eth/v1/config/spec').data;
  t.match(spec, { SLOTS_PER_EPOCH: '32', SECONDS_PER_SLOT: /^\d+$/, DEPOSIT_CHAIN_ID: '31337', ELECTRA_FORK_EPOCH: '0' });
  const schedule = get('/eth/v1/config/fork_schedule').data;
  t.equal(schedule[schedule.length - 1].current_version, get('/eth/v1/beacon/states/head/fork').data.current_version);
  t.same(get('/eth/v1/config/deposit_contract').data.chain_id, '31337');
  t.match(get('/eth/v1/node/syncing').data, { head_slot: '100', is_syncing: false, el_offline: false });
  t.same(get('/eth/v2/debug/beacon/heads').data, [{ root: header.root, slot: '100', execution_optimistic: false }]);
  t.equal(get('/eth/v1/debug/fork_choice').fork_choice_nodes.length, 100 - 32 + 1, 'fork choice from the finalized slot to the head');
  t.equal(get('/eth/v2/debug/beacon/states/head').data.slot, '100');
  t.equal(get('/eth/v2/debug/beacon/states/head').data.latest_execution_payload_header.block_hash, latest.hash);
  t.match(get('/eth/v1/validator/attestation_data?slot=100&committee_index=0').data, {
    slot: '100',
    beacon_block_root: header.root,
    target: { epoch: '3', root: await hash(96) },
  });
  const produced = answers.get(`GET /eth/v3/validator/blocks/${slot + 1}?randao_reveal=${RANDAO_REVEAL}`)!;
  t.match(produced.json, {
    execution_payload_blinded: false,
    data: { block: { slot: '101', parent_root: header.root, body: { randao_reveal: RANDAO_REVEAL } } },
  });
  t.equal(produced.headers.get('eth-execution-payload-blinded'), 'false');

  for (const [path, body] of [
    ['/eth/v1/beacon/pool/attestations', [{ data: { slot: '99' }, aggregation_bits: '0x03', signature: '0x00' }]],
    ['/eth/v1/beacon/pool/attester_slashings', { attestation_1: {}, attestation_2: {} }],
    ['/eth/v1/beacon/pool/proposer_slashings', { signed_header_1: {}, signed_header_2: {} }],
    ['/eth/v1/beacon/pool/voluntary_exits', { message: { epoch: '1', validator_index: '3' }, signature: '0x00' }],
    ['/eth/v1/beacon/pool/sync_committees', [{ slot: '99', validator_index: '1' }]],
    ['/eth/v1/beacon/pool/bls_to_execution_changes', [{ message: { validator_index: '1' } }]],
    ['/eth/v2/beacon/pool/attestations', [{ data: { slot: '99' }, committee_bits: '0x01' }]],
    ['/eth/v2/beacon/pool/attester_slashings', { attestation_1: {}, attestation_2: {} }],
  ] as const) {
    const posted = await call(node, path, { body });
    t.same([posted.status, posted.text], [200, ''], `POST ${path}: 200, empty body`);
    const listed = (await call(node, path)).json.data;
    t.same(listed[listed.length - 1], Array.isArray(body) ? body[body.length - 1] : body, `GET ${path} shows what was posted`);
  }
  t.equal((await call(node, '/eth/v1/beacon/pool/attestations?slot=98')).json.data.length, 0, 'pool attestations filter by slot');
  t.equal((await call(node, '/eth/v1/beacon/pool/voluntary_exits', { body: [] })).status, 400, 'an exit is one object, not a list');
});

t.test('block and state ids of every form; 400, 404 and 405', async (t) => {
  const { anvil, node } = await devnet(t);
  await rpc(anvil, 'anvil_mine', ['0x28']);
  // A transfer gives the next block a state root of its own.
  await transfer(anvil);
  await rpc(anvil, 'anvil_mine', ['0x1b']);
  await headAt(node, 68);
  const b7 = { hash: await rootOf(node, 7) };
  const b41 = { stateRoot: await stateRootOf(node, 41) };

  const slotOfHeader = async (id: string) => (await call(node, `/eth/v1/beacon/headers/${id}`)).json?.data?.header?.message?.slot;
  t.equal(await slotOfHeader('head'), '68');
  t.equal(await slotOfHeader('genesis'), '0');
  t.equal(await slotOfHeader('finalized'), '0', 'finalized at epoch 2 is the start of epoch 0');
  t.equal(await slotOfHeader('7'), '7');
  t.equal(await slotOfHeader(b7.hash), '7', 'block root');
  t.equal(await slotOfHeader(b7.hash.toUpperCase().replace('0X', '0x')), '7', 'block roots in any case');
  t.equal((await call(node, `/eth/v1/beacon/blocks/genesis/root`)).json.data.root, await rootOf(node, 0));
  t.equal(
    (await call(node, `/eth/v2/beacon/blocks/genesis`)).json.data.message.body.execution_payload.block_hash,
    (await blockAt(anvil, 0)).hash,
    "genesis carries anvil's block 0",
  );

  const stateEpoch = async (id: string) => (await call(node, `/eth/v1/beacon/states/${id}/committees`)).json?.data?.[0]?.slot;
  t.equal(await stateEpoch('head'), '64', 'head state is in epoch 2');
  t.equal(await stateEpoch('justified'), '32', 'justified state is the start of epoch 1');
  t.equal(await stateEpoch('finalized'), '0');
  t.equal(await stateEpoch('genesis'), '0');
  t.equal(await stateEpoch('40'), '32');
  t.equal((await call(node, `/eth/v1/beacon/states/${b41.stateRoot}/root`)).json.data.root, b41.stateRoot, 'state root');
  t.equal((await call(node, `/eth/v2/debug/beacon/states/${b41.stateRoot}`)).json.data.slot, '41', 'a state root names its slot');
  const txs = (await call(node, '/eth/v2/beacon/blocks/41')).json.data.message.body.execution_payload.transactions;
  t.match(txs, [/^0x02[0-9a-f]+$/], 'the execution payload carries the raw signed transfer');

  const errors: Array<[string, number, { method?: string; body?: unknown }?]> = [
    ['/eth/v1/beacon/headers/69', 404],
    ['/eth/v1/beacon/headers/99999999999999999999', 404],
    ['/eth/v1/beacon/headers/0x' + '11'.repeat(32), 404],
    ['/eth/v1/beacon/states/0x' + '11'.repeat(32) + '/root', 404],
    ['/eth/v1/beacon/states/69/root', 404],
    ['/eth/v1/beacon/headers/justified', 400],
    ['/eth/v1/beacon/headers/current', 400],
    ['/eth/v1/beacon/blocks/0x1234/root', 400],
    ['/eth/v1/beacon/states/-1/root', 400],
    ['/eth/v1/beacon/states/head/validators/0x1234', 400],
    ['/eth/v1/beacon/states/head/validators/64', 404],
    ['/eth/v1/beacon/states/head/validators?status=sleeping', 400],
    ['/eth/v1/beacon/states/head/committees?epoch=9', 400],
    ['/eth/v1/validator/duties/proposer/9', 400],
    ['/eth/v1/validator/attestation_data?committee_index=0', 400],
    ['/eth/v3/validator/blocks/69', 400],
    ['/eth/v3/validator/blocks/0?randao_reveal=' + RANDAO_REVEAL, 400],
    ['/eth/v1/events', 400],
    ['/eth/v1/events?topics=head,bogus', 400],
    ['/eth/v1/nope', 404],
    ['/eth/v1/beacon/states/head', 404],
    ['/eth/v1/validator/duties/attester/1', 400],
    ['/eth/v1/validator/duties/attester/1?index=one', 400],
    ['/eth/v1/validator/duties/attester/1', 405, { method: 'PUT' }],
    ['/eth/v1/validator/duties/sync/1', 405],
    ['/eth/v1/beacon/genesis', 405, { method: 'POST', body: {} }],
    ['/eth/v1/beacon/headers', 405, { method: 'DELETE' }],
    ['/eth/v1/beacon/states/head/validator_balances', 400, { method: 'POST', body: '{"not json' }],
    ['/eth/v1/validator/duties/attester/1', 400, { method: 'POST', body: { not: 'a list' } }],
  ];
  for (const [path, status, init] of errors) {
    const a = await call(node, path, init);
    t.same(
      [a.status, a.json?.code, typeof a.json?.message],
      [status, status, 'string'],
      `${init?.method ?? 'GET'} ${path} → ${status} {code, message}`,
    );
  }
  t.equal(
    (await call(node, '/eth/v1/validator/duties/attester/1', { method: 'PUT' })).headers.get('allow'),
    'GET, POST',
    '405 names the allowed methods',
  );
  t.equal((await call(node, '/eth/v1/validator/duties/sync/1')).headers.get('allow'), 'POST', 'sync duties stay POST only');
});

t.test("SSZ blocks and states decode with Lodestar's types, equal the JSON, and hash to the roots the node names", async (t) => {
  const { anvil, node } = await devnet(t);
  // Block 1 carries a transfer, so a payload with a transaction is hashed too.
  await transfer(anvil);
  await rpc(anvil, 'anvil_mine', ['0x5']);
  await headAt(node, 6);
  const sszAccept = { accept: 'application/octet-stream' };
  const zero = '0x' + '00'.repeat(32);

  for (const slot of [0, 1, 6]) {
    const res = await fetch(`${node.url}/eth/v2/beacon/blocks/${slot}`, { headers: sszAccept });
    t.equal(res.headers.get('content-type'), 'application/octet-stream', `block ${slot}: SSZ`);
    t.equal(res.headers.get('eth-consensus-version'), 'electra');
    const bytes = new Uint8Array(await res.arrayBuffer());
    const signed = ssz.electra.SignedBeaconBlock.deserialize(bytes);
    t.same(
      ssz.electra.SignedBeaconBlock.toJson(signed),
      (await call(node, `/eth/v2/beacon/blocks/${slot}`)).json.data,
      `block ${slot}: SSZ and JSON are one block`,
    );
    const root = hex(ssz.electra.BeaconBlock.hashTreeRoot(signed.message));
    t.equal(root, await rootOf(node, slot), `block ${slot}: its root is its hash_tree_root`);
    t.equal(
      hex(signed.message.parentRoot),
      slot === 0 ? zero : await rootOf(node, slot - 1),
      `block ${slot}: parent_root is the parent's root`,
    );
    const header = (await call(node, `/eth/v1/beacon/headers/${slot}`)).json.data.header.message;
    t.equal(
      header.body_root,
      hex(ssz.electra.BeaconBlockBody.hashTreeRoot(signed.message.body)),
      `block ${slot}: the header's body_root is the body's root`,
    );
    t.equal(
      (await blockAt(anvil, slot)).hash,
      hex(signed.message.body.executionPayload.blockHash),
      `block ${slot}: the payload is anvil's block ${slot}`,
    );

    const stateRes = await fetch(`${node.url}/eth/v2/debug/beacon/states/${slot}`, { headers: sszAccept });
    t.equal(stateRes.headers.get('content-type'), 'application/octet-stream', `state ${slot}: SSZ`);
    const state = ssz.electra.BeaconState.deserialize(new Uint8Array(await stateRes.arrayBuffer()));
    const stateRoot = hex(ssz.electra.BeaconState.hashTreeRoot(state));
    t.equal(stateRoot, await stateRootOf(node, slot), `state ${slot}: its root is its hash_tree_root`);
    t.equal(hex(signed.message.stateRoot), stateRoot, `block ${slot} names that state`);
    t.same(
      [
        state.slot,
        state.latestBlockHeader.slot,
        hex(state.latestBlockHeader.parentRoot),
        hex(state.latestBlockHeader.bodyRoot),
        hex(state.latestBlockHeader.stateRoot),
      ],
      [slot, slot, hex(signed.message.parentRoot), header.body_root, zero],
      `state ${slot}: latest_block_header is its block's, state_root left zero`,
    );
    if (slot > 0) {
      t.equal(hex(state.blockRoots[slot - 1]!), await rootOf(node, slot - 1), `state ${slot}: block_roots holds the real roots`);
      t.equal(hex(state.stateRoots[slot - 1]!), await stateRootOf(node, slot - 1), `state ${slot}: state_roots too`);
    }
    const payload = signed.message.body.executionPayload;
    t.equal(
      hex(state.latestExecutionPayloadHeader.transactionsRoot),
      hex(ssz.bellatrix.Transactions.hashTreeRoot(payload.transactions)),
      `state ${slot}: the payload header's transactions_root`,
    );
  }
  const one = (await call(node, '/eth/v2/beacon/blocks/1')).json.data.message.body.execution_payload.transactions;
  t.match(one, [/^0x02[0-9a-f]+$/], 'block 1 carries the raw signed transfer');

  const head = await fetch(`${node.url}/eth/v2/debug/beacon/states/head`, { headers: sszAccept });
  const headState = ssz.electra.BeaconState.deserialize(new Uint8Array(await head.arrayBuffer()));
  t.same(
    ssz.electra.BeaconState.toJson(headState),
    (await call(node, '/eth/v2/debug/beacon/states/head')).json.data,
    'the head state: SSZ and JSON are one state',
  );
  t.equal(Number(headState.genesisTime), Number((await blockAt(anvil, 0)).timestamp), 'genesis_time is block 0 timestamp');

  const again = Buffer.from(await (await fetch(`${node.url}/eth/v2/beacon/blocks/head`, { headers: sszAccept })).arrayBuffer());
  t.ok(
    again.equals(Buffer.from(await (await fetch(`${node.url}/eth/v2/beacon/blocks/6`, { headers: sszAccept })).arrayBuffer())),
    'the same block gives the same bytes',
  );
  const preferJson = await fetch(`${node.url}/eth/v2/beacon/blocks/head`, {
    headers: { accept: 'application/octet-stream;q=0.5, application/json' },
  });
  t.match(preferJson.headers.get('content-type'), /^application\/json/, 'JSON when Accept prefers it');
  await preferJson.arrayBuffer();
});

t.test('events: block and head per slot in order, finality as epochs pass, reorgs, and stop', async (t) => {
  const { anvil, node } = await devnet(t, 4);
  const start = node.headSlot();
  const commaForm = await openEvents(t, node, 'topics=head,block');
  const repeatedForm = await openEvents(t, node, 'topics=head&topics=block');
  const finality = await openEvents(t, node, 'topics=finalized_checkpoint,attestation,chain_reorg');

  for (let i = 0; i < 18; i++) await rpc(anvil, 'evm_mine');
  await until('18 head events', () => commaForm.events.filter((e) => e.event === 'head').length >= 18 && repeatedForm.events.length >= 36);

  const expected: Array<{ event: string; slot: string; block: string }> = [];
  for (let n = start + 1; n <= start + 18; n++) {
    const root = await rootOf(node, n);
    expected.push({ event: 'block', slot: String(n), block: root }, { event: 'head', slot: String(n), block: root });
  }
  for (const [name, stream] of [
    ['comma', commaForm],
    ['repeated', repeatedForm],
  ] as const) {
    t.same(
      stream.events.map((e) => ({ event: e.event, slot: e.data.slot, block: e.data.block })),
      expected,
      `${name} topics form: block then head for every mined slot, in order`,
    );
  }
  const head8 = commaForm.events.find((e) => e.event === 'head' && e.data.slot === '8')!.data;
  t.same(head8, {
    slot: '8',
    block: await rootOf(node, 8),
    state: await stateRootOf(node, 8),
    epoch_transition: true,
    previous_duty_dependent_root: await rootOf(node, 3),
    current_duty_dependent_root: await rootOf(node, 7),
    execution_optimistic: false,
  });
  t.equal(commaForm.events.find((e) => e.event === 'head' && e.data.slot === '9')?.data.epoch_transition, false);

  await until('finalized epoch 2', () => finality.events.length >= 2);
  t.same(
    finality.events.map((e) => [e.event, e.data.epoch, e.data.block, e.data.state]),
    [
      ['finalized_checkpoint', '1', await rootOf(node, 4), await stateRootOf(node, 4)],
      ['finalized_checkpoint', '2', await rootOf(node, 8), await stateRootOf(node, 8)],
    ],
    'finalized_checkpoint at slots 12 and 16; attestation stays silent',
  );

  const snapshot = await rpc<string>(anvil, 'evm_snapshot');
  await rpc(anvil, 'anvil_mine', ['0x2']);
  await headAt(node, 20);
  const oldHead = await blockAt(anvil, 'latest');
  const oldHeadRoot = await rootOf(node, 'head');
  const root18 = await rootOf(node, 18);
  const oldRoot19 = await rootOf(node, 19);
  await rpc(anvil, 'evm_revert', [snapshot]);
  await rpc(anvil, 'evm_setNextBlockTimestamp', [Number(oldHead.timestamp) + 100]);
  await rpc(anvil, 'anvil_mine', ['0x3']);
  const newHead = await blockAt(anvil, 'latest');
  await until('reorg seen', () => finality.events.some((e) => e.event === 'chain_reorg'));
  const payloadHash = async (id: string | number): Promise<string> =>
    (await call(node, `/eth/v2/beacon/blocks/${id}`)).json.data.message.body.execution_payload.block_hash;
  await until('new head followed', async () => (await payloadHash('head')) === newHead.hash);
  // The poll may land between evm_revert and the mining after it, or between the three blocks
  // anvil_mine makes: the reorg's new head is then slot 18, 19 or 20 of the new chain, not 21.
  const reorg = finality.events.find((e) => e.event === 'chain_reorg')?.data;
  t.match(reorg, { depth: '2', old_head_block: oldHeadRoot, execution_optimistic: false });
  const reorgSlot = Number(reorg?.slot);
  t.ok(reorgSlot >= 18 && reorgSlot <= 21, `the reorg's slot is on the new chain (${String(reorg?.slot)})`);
  t.equal(reorg?.new_head_block, await rootOf(node, reorgSlot), `reorg names the new chain's block at its slot (${String(reorg?.slot)})`);
  t.equal(await rootOf(node, 18), root18, 'the common ancestor keeps its root');
  t.equal(await payloadHash(19), (await blockAt(anvil, 19)).hash, 'reorged slots answer the new chain');
  t.not(await rootOf(node, 19), oldRoot19, 'with roots of their own');

  await node.stop();
  await Promise.all([commaForm.ended, repeatedForm.ended, finality.ended]);
  t.pass('stop() ends open event streams');
  await t.rejects(fetch(`${node.url}/eth/v1/node/health`), 'and closes the server');
});

t.test('health is 503 while anvil is unreachable', async (t) => {
  const { anvil, node } = await devnet(t);
  t.equal((await call(node, '/eth/v1/node/health')).status, 200);
  await anvil.stop();
  await until('health 503', async () => (await call(node, '/eth/v1/node/health')).status === 503);
  t.equal((await call(node, '/eth/v1/node/syncing')).json.data.el_offline, true);
  t.equal((await call(node, '/eth/v1/beacon/headers/head')).status, 200, 'cached slots are still served');
});

t.test('an idle stream gets a comment line every 10 s', async (t) => {
  const { node } = await devnet(t);
  const idle = await openEvents(t, node, 'topics=voluntary_exit');
  const opened = Date.now();
  await until('a keep-alive comment', () => /(^|\n):[^\n]*\n/.test(idle.raw), 12_000);
  const waited = Date.now() - opened;
  t.ok(waited > 9_000 && waited < 11_500, `the comment came 10 s after opening (${waited} ms)`);
  t.same(idle.events, [], 'a silent topic sends no events');
});

t.test('historySlots: the newest slots and genesis are served; an older slot, block root or state root is 404', async (t) => {
  const anvil = await startAnvil();
  t.teardown(() => anvil.stop());
  const node = await startBeaconNode({ executionUrl: anvil.url, pollMs: 40, slotsPerEpoch: 8, historySlots: 32 });
  t.teardown(() => node.stop());
  await rpc(anvil, 'anvil_mine', ['0xa']);
  await headAt(node, 10);
  const early = { root: await rootOf(node, 5), stateRoot: await stateRootOf(node, 5) };
  t.match(early, { root: /^0x[0-9a-f]{64}$/, stateRoot: /^0x[0-9a-f]{64}$/ }, 'slot 5 is served while it is recent');
  await rpc(anvil, 'anvil_mine', ['0x64']);
  await headAt(node, 110);
  t.equal((await call(node, '/eth/v1/beacon/headers/79')).status, 200, 'the oldest of the 32 newest slots is served');
  t.equal((await call(node, '/eth/v1/beacon/states/79/root')).status, 200, 'and its state');
  t.equal((await call(node, '/eth/v1/beacon/headers/78')).status, 404, 'the slot before it is not');
  t.equal((await call(node, '/eth/v1/beacon/states/78/root')).status, 404, 'nor its state');
  t.equal((await call(node, `/eth/v1/beacon/headers/${early.root}`)).status, 404, 'an old block root is not found');
  t.equal((await call(node, `/eth/v1/beacon/states/${early.stateRoot}/root`)).status, 404, 'nor an old state root');
  t.equal((await call(node, '/eth/v1/beacon/headers/genesis')).status, 200, 'genesis stays');
  await t.rejects(
    startBeaconNode({ executionUrl: anvil.url, slotsPerEpoch: 8, historySlots: 31 }),
    /historySlots must be an integer of at least 4 epochs \(32 slots\)/,
  );
});
