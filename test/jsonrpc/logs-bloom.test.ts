import t from 'tap';
import { BLOOM_BYTES, bloomBits, bloomHas, bloomOf, hexBytes, itemBits } from '../../src/jsonrpc/logs-bloom.js';
import { ECHO_TOPIC } from '../support/contract.js';
import { rpc } from '../support/rpc.js';
import { ECHO_ADDRESS, RECIPIENT, sameChainAnvils } from '../support/same-chain.js';

const result = async (url: string, method: string, params: unknown[]): Promise<Record<string, unknown>> =>
  (((await rpc(url, method, params)).json as { result: unknown }).result ?? null) as Record<string, unknown>;

t.test("a real block's logsBloom holds its logs' address and topics, and not what no log of it has", async (t) => {
  const chain = await sameChainAnvils(t, 1, { logs: true });
  await chain.mineTo(0, 3);
  const url = chain.nodes[0]!.url;
  const block = await result(url, 'eth_getBlockByNumber', ['0x3', false]);
  const bloom = bloomOf(block.logsBloom);
  t.ok(bloom, 'the header has a bloom');
  const logs = (await result(url, 'eth_getLogs', [{ fromBlock: '0x3', toBlock: '0x3' }])) as unknown as Array<Record<string, unknown>>;
  t.equal(logs.length, 1, 'block 3 holds the echo call’s log');
  const log = logs[0]!;
  t.equal(log.address, ECHO_ADDRESS);
  const memo = new Map();
  t.ok(bloomHas(bloom!, itemBits(log.address, 20, memo)!), "the log's address is in the bloom");
  t.ok(bloomHas(bloom!, itemBits(ECHO_TOPIC, 32, memo)!), "the log's topic is in the bloom");
  t.notOk(bloomHas(bloom!, itemBits(RECIPIENT, 20, memo)!), 'an address no log has is not');
  t.notOk(bloomHas(bloom!, itemBits(`0x${'ab'.repeat(32)}`, 32, memo)!), 'nor a topic no log has');

  // Block 1 deploys the contract and logs nothing: an empty bloom holds nothing.
  const deploy = bloomOf((await result(url, 'eth_getBlockByNumber', ['0x1', false])).logsBloom)!;
  t.ok(
    deploy.every((b) => b === 0),
    'a block without logs has an empty bloom',
  );
  t.notOk(bloomHas(deploy, itemBits(ECHO_ADDRESS, 20, memo)!));
});

t.test('bits and hex bytes', async (t) => {
  // The bit layout itself is proven against anvil's blooms above; here, a bloom of one item holds it and (for
  // these two items, whose bits differ) not another.
  const bloom = new Uint8Array(BLOOM_BYTES);
  const bits = bloomBits(Buffer.from('testtest'));
  for (let k = 0; k < 6; k += 2) bloom[bits[k]!]! |= bits[k + 1]!;
  t.ok(bloomHas(bloom, bits));
  t.notOk(bloomHas(bloom, bloomBits(Buffer.from('test'))), 'another item is not held');
  t.equal(hexBytes('0x1234', 2)?.length, 2);
  t.equal(hexBytes('0x12', 2), null, 'a short one is refused');
  t.equal(hexBytes('0x12zz', 2), null, 'non-hex is refused');
  t.equal(hexBytes(12, 2), null);
  t.equal(bloomOf('0x00'), null);
  const memo = new Map();
  t.equal(itemBits('0xnothex', 20, memo), null, 'a malformed item has no bits');
  t.equal(itemBits(ECHO_ADDRESS.toUpperCase().replace('0X', '0x'), 20, memo), itemBits(ECHO_ADDRESS, 20, memo), 'any case, memoized');
});
