import t from 'tap';
import { Wallet } from 'ethers';
import { rawTransactionTarget } from '../../src/fences/raw-transaction.js';

// Its own file, so the decoder is not loaded yet: the module is fresh in this process.
t.test('before the decoder is loaded, the answer is a promise of the same', async (t) => {
  const wallet = new Wallet(`0x${'11'.repeat(32)}`);
  const to = '0x4444444444444444444444444444444444444444';
  const raw = await wallet.signTransaction({
    type: 2,
    chainId: 1,
    nonce: 0,
    gasLimit: 21000,
    maxFeePerGas: 2n,
    maxPriorityFeePerGas: 1n,
    to,
  });
  const first = rawTransactionTarget(raw);
  t.ok(first instanceof Promise, 'a promise while ethers loads');
  t.equal(await first, to);
  t.equal(rawTransactionTarget(raw), to, 'then synchronous');
  t.notOk(rawTransactionTarget('0x12') instanceof Promise, 'bytes that are not a transaction: synchronous once loaded');
});

t.test('a value that is not hex is refused without loading anything', async (t) => {
  t.type(rawTransactionTarget(42), Error);
  t.type(rawTransactionTarget('0x'), Error);
});
