import t from 'tap';
import { Wallet } from 'ethers';
import { contractEntryProblem, fencesMethod, refuseContracts } from '../../src/fences/contracts.js';
import { loadRawTransactionDecoder, rawTransactionTarget } from '../../src/fences/raw-transaction.js';

const A = '0x1111111111111111111111111111111111111111';
const B = '0x2222222222222222222222222222222222222222';
const OTHER = '0x3333333333333333333333333333333333333333';
const allowed = new Set([A, B]);
const plain = { balance: false };

/** The check of a call that must answer synchronously. */
function refusal(method: string, params: unknown[], options = plain): string | undefined {
  const r = refuseContracts(allowed, method, params, options);
  if (r instanceof Promise) throw new Error(`${method}: a promise`);
  return r;
}

t.test('entries are addresses', async (t) => {
  t.equal(contractEntryProblem(A), undefined);
  t.equal(contractEntryProblem('0xAbCdEf0123456789aBcDeF0123456789abcdef01'), undefined);
  t.match(contractEntryProblem('0x1234'), /is not an address/);
  t.match(contractEntryProblem('1111111111111111111111111111111111111111'), /is not an address/);
});

t.test('calls with a call object: its `to`', async (t) => {
  for (const method of ['eth_call', 'eth_estimateGas', 'eth_createAccessList', 'eth_fillTransaction', 'debug_traceCall', 'trace_call']) {
    t.equal(refusal(method, [{ to: A, data: '0x' }, 'latest']), undefined, `${method} to an allowed contract`);
    t.equal(
      refusal(method, [{ to: A.toUpperCase().replace('0X', '0x') }, 'latest']),
      undefined,
      `${method}: the case of an address does not matter`,
    );
    t.match(
      refusal(method, [{ to: OTHER }, 'latest']),
      new RegExp(`${method}: contract ${OTHER} is not allowed for this key`),
      `${method} elsewhere`,
    );
    t.match(refusal(method, [{ data: '0x6080' }, 'latest']), /names no contract address/, `${method} without to (creation code)`);
    t.match(refusal(method, [{ to: null, data: '0x6080' }]), /names no contract address/, `${method} with to null`);
    t.match(refusal(method, []), /names no contract address/, `${method} without params`);
  }
});

t.test('log filters: every address allowed, none missing', async (t) => {
  for (const method of ['eth_getLogs', 'eth_newFilter']) {
    t.equal(refusal(method, [{ address: A, fromBlock: '0x1' }]), undefined, `${method}: one allowed address`);
    t.equal(refusal(method, [{ address: [A, B] }]), undefined, `${method}: a list of allowed addresses`);
    t.match(
      refusal(method, [{ address: [A, OTHER] }]),
      new RegExp(`contract ${OTHER} is not allowed`),
      `${method}: one of the list refused`,
    );
    t.match(refusal(method, [{ fromBlock: '0x1' }]), /names no contract address/, `${method} without address matches every contract`);
    t.match(refusal(method, [{ address: [] }]), /names no contract address/, `${method} with an empty list`);
    t.match(refusal(method, [{ address: null, blockHash: `0x${'ab'.repeat(32)}` }]), /names no contract address/);
    t.match(refusal(method, [{ address: 7 }]), /contract 7 is not allowed/, 'a non-string address is refused');
  }
});

t.test('logs subscriptions; other subscriptions pass', async (t) => {
  t.equal(refusal('eth_subscribe', ['logs', { address: [A] }]), undefined);
  t.match(refusal('eth_subscribe', ['logs', { address: OTHER }]), /eth_subscribe\("logs"\): contract 0x3333/);
  t.match(refusal('eth_subscribe', ['logs', {}]), /eth_subscribe\("logs"\) names no contract address/);
  t.match(refusal('eth_subscribe', ['logs']), /names no contract address/);
  t.equal(refusal('eth_subscribe', ['newHeads']), undefined);
  t.equal(refusal('eth_subscribe', ['newPendingTransactions']), undefined);
});

t.test('state reads by address; eth_getBalance only when the operator says so', async (t) => {
  for (const method of ['eth_getCode', 'eth_getStorageAt', 'eth_getProof']) {
    t.equal(refusal(method, [B, '0x0', 'latest']), undefined, method);
    t.match(refusal(method, [OTHER, '0x0']), /is not allowed/, method);
  }
  t.equal(refusal('eth_getStorageValues', [{ [A]: ['0x0'], [B]: ['0x1'] }, 'latest']), undefined);
  t.match(refusal('eth_getStorageValues', [{ [A]: ['0x0'], [OTHER]: ['0x1'] }, 'latest']), /0x3333/);
  t.equal(refusal('eth_getBalance', [OTHER, 'latest']), undefined, 'a balance is not a contract call by default');
  t.match(refusal('eth_getBalance', [OTHER, 'latest'], { balance: true }), /eth_getBalance: contract 0x3333/);
  t.equal(refusal('eth_getBalance', [A, 'latest'], { balance: true }), undefined);
  t.equal(fencesMethod('eth_getBalance', plain), false);
  t.equal(fencesMethod('eth_getBalance', { balance: true }), true);
});

t.test('eth_simulateV1 and trace_filter name their targets too', async (t) => {
  const sim = (calls: unknown[]) => [{ blockStateCalls: [{ calls }] }, 'latest'];
  t.equal(refusal('eth_simulateV1', sim([{ to: A }, { to: B }])), undefined);
  t.match(refusal('eth_simulateV1', sim([{ to: A }, { to: OTHER }])), /0x3333/);
  t.match(refusal('eth_simulateV1', sim([{ to: A }, { data: '0x60' }])), /names no contract/);
  t.match(refusal('eth_simulateV1', sim([])), /names no contract/);
  t.equal(refusal('trace_filter', [{ toAddress: [A], fromBlock: '0x1' }]), undefined);
  t.match(refusal('trace_filter', [{ fromBlock: '0x1' }]), /names no contract/);
});

t.test('methods that name no contract are not fenced', async (t) => {
  for (const method of ['eth_blockNumber', 'eth_getTransactionReceipt', 'eth_chainId', 'eth_getBlockByNumber', 'eth_newBlockFilter']) {
    t.equal(fencesMethod(method, plain), false, method);
    t.equal(refusal(method, []), undefined, method);
  }
});

const wallet = new Wallet(`0x${'42'.repeat(32)}`);
const signed = (tx: Record<string, unknown>) =>
  wallet.signTransaction({ chainId: 1, nonce: 0, gasLimit: 21000, value: 1, ...tx } as Parameters<Wallet['signTransaction']>[0]);

t.test('raw transactions: the decoded recipient of every type, signed with ethers', async (t) => {
  await loadRawTransactionDecoder();
  const kinds: Array<[string, Record<string, unknown>]> = [
    ['legacy', { type: 0, gasPrice: 1n }],
    ['EIP-2930', { type: 1, gasPrice: 1n, accessList: [] }],
    ['EIP-1559', { type: 2, maxFeePerGas: 2n, maxPriorityFeePerGas: 1n }],
  ];
  for (const [name, fields] of kinds) {
    const toAllowed = await signed({ ...fields, to: A });
    const toOther = await signed({ ...fields, to: OTHER });
    const deploy = await signed({ ...fields, to: null, data: '0x6080', value: 0 });
    t.equal(refuseContracts(allowed, 'eth_sendRawTransaction', [toAllowed], plain), undefined, `${name} to an allowed contract`);
    t.equal(
      refuseContracts(allowed, 'eth_sendRawTransaction', [toOther], plain),
      `eth_sendRawTransaction: contract ${OTHER} is not allowed for this key`,
      `${name} to another`,
    );
    t.match(refuseContracts(allowed, 'eth_sendRawTransaction', [deploy], plain), /deploys a contract/, `${name} deploying`);
  }
  t.match(refuseContracts(allowed, 'eth_sendRawTransaction', ['0xdeadbeef'], plain), /could not be decoded/);
  t.match(refuseContracts(allowed, 'eth_sendRawTransaction', ['nothex'], plain), /could not be decoded \(params\[0\] must be/);
  t.match(refuseContracts(allowed, 'eth_sendRawTransaction', [], plain), /could not be decoded/);
});

t.test('rawTransactionTarget: lower-case recipient, null for a deployment', async (t) => {
  await loadRawTransactionDecoder();
  const checksummed = '0x52908400098527886E0F7030069857D2E4169EE7';
  t.equal(
    rawTransactionTarget(await signed({ type: 2, maxFeePerGas: 2n, maxPriorityFeePerGas: 1n, to: checksummed })),
    checksummed.toLowerCase(),
  );
  t.equal(rawTransactionTarget(await signed({ type: 2, maxFeePerGas: 2n, maxPriorityFeePerGas: 1n, to: null, data: '0x00' })), null);
});
