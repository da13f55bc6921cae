import t from 'tap';
import { createInFlight, dedupKeyFor as dedupKeyOfRow, RENEW_AFTER_SETS } from '../../src/chain/dedup.js';
import { methodRow } from '../../src/jsonrpc/methods.js';

/** The sharing key of a call the test names by method (the key reads the method's catalogue row). */
const dedupKeyFor = (chainSlug: string, method: string, params: unknown[]): string | null =>
  dedupKeyOfRow(chainSlug, methodRow(method)!, params);
import { rewriteId } from '../../src/jsonrpc/id-rewrite.js';

/** A start function whose calls are recorded and finished by the test. */
function controlledStart<T>(): { start: (done: (outcome: T) => void) => void; finish(outcome: T): void; readonly calls: number } {
  const pending: Array<(outcome: T) => void> = [];
  let calls = 0;
  return {
    start(done) {
      calls++;
      pending.push(done);
    },
    finish(outcome) {
      const done = pending.shift();
      if (done === undefined) throw new Error('no call in flight');
      done(outcome);
    },
    get calls() {
      return calls;
    },
  };
}

t.test('100 concurrent joiners: one call, every joiner answered once with the same outcome', async (t) => {
  const shared = createInFlight<string>();
  const call = controlledStart<string>();
  const answers: Array<[number, string]> = [];
  for (let i = 0; i < 100; i++) shared.join('k', call.start, (outcome) => answers.push([i, outcome]));
  t.equal(call.calls, 1, 'start ran once');
  t.equal(shared.inFlight(), 1);
  t.equal(answers.length, 0, 'nobody answered before the call completes');
  call.finish('answer');
  t.same(
    answers,
    Array.from({ length: 100 }, (_, i) => [i, 'answer']),
    'each once, leader first, then in join order',
  );
  t.equal(shared.inFlight(), 0, 'the key is released');
  t.throws(() => call.finish('again'), /no call in flight/, 'no second call was made');
});

t.test('joiners arriving over several turns of the event loop while the call is on its way share it', async (t) => {
  const shared = createInFlight<number>();
  let starts = 0;
  // The call ends when the test says so, not on a timer a loaded machine could fire between the turns.
  let finish: (() => void) | null = null;
  const slowCall = (done: (n: number) => void): void => {
    const n = ++starts;
    finish = () => done(n);
  };
  const ask = (): Promise<number> => new Promise((resolve) => shared.join('k', slowCall, resolve));
  const asks: Array<Promise<number>> = [];
  for (let i = 0; i < 100; i++) {
    asks.push(ask());
    if (i % 10 === 9) await new Promise((r) => setImmediate(r));
  }
  finish!();
  const outcomes = await Promise.all(asks);
  t.equal(starts, 1);
  t.same(new Set(outcomes), new Set([1]), "all got the one call's outcome");
  const later = ask();
  finish!();
  t.equal(await later, 2, 'a later caller gets a new call');
});

t.test('a call after completion starts afresh', async (t) => {
  const shared = createInFlight<number>();
  const call = controlledStart<number>();
  const got: number[] = [];
  shared.join('k', call.start, (n) => got.push(n));
  call.finish(1);
  shared.join('k', call.start, (n) => got.push(n));
  shared.join('k', call.start, (n) => got.push(n));
  t.equal(call.calls, 2, 'the later key made a new call');
  call.finish(2);
  t.same(got, [1, 2, 2]);
});

t.test('a joiner calling again from its onDone starts a new call', async (t) => {
  const shared = createInFlight<number>();
  const call = controlledStart<number>();
  const got: string[] = [];
  shared.join('k', call.start, (n) => {
    got.push(`first ${n}`);
    shared.join('k', call.start, (m) => got.push(`again ${m}`));
  });
  call.finish(1);
  t.equal(call.calls, 2);
  call.finish(2);
  t.same(got, ['first 1', 'again 2']);
});

t.test('different keys do not share', async (t) => {
  const shared = createInFlight<string>();
  const call = controlledStart<string>();
  const got: string[] = [];
  shared.join('a', call.start, (o) => got.push(`a:${o}`));
  shared.join('b', call.start, (o) => got.push(`b:${o}`));
  t.equal(call.calls, 2);
  t.equal(shared.inFlight(), 2);
  call.finish('1');
  call.finish('2');
  t.same(got, ['a:1', 'b:2']);
});

t.test('a throwing joiner does not hurt the others', async (t) => {
  const reported: Array<[unknown, string]> = [];
  const shared = createInFlight<string>((err, key) => reported.push([err, key]));
  const call = controlledStart<string>();
  const got: number[] = [];
  const boom = new Error('client gone');
  shared.join('k', call.start, () => {
    got.push(0);
    throw boom;
  });
  shared.join('k', call.start, () => got.push(1));
  shared.join('k', call.start, () => {
    throw boom;
  });
  shared.join('k', call.start, () => got.push(3));
  call.finish('x');
  t.same(got, [0, 1, 3], 'every other joiner got the outcome');
  t.same(
    reported,
    [
      [boom, 'k'],
      [boom, 'k'],
    ],
    'both throws were reported',
  );
  t.equal(shared.inFlight(), 0, 'the key is released');
});

t.test('without a reporter, the first throw surfaces from done after all are answered', async (t) => {
  const shared = createInFlight<string>();
  const call = controlledStart<string>();
  const got: number[] = [];
  const first = new Error('first');
  shared.join('k', call.start, () => got.push(0));
  shared.join('k', call.start, () => {
    throw first;
  });
  shared.join('k', call.start, () => {
    throw new Error('second');
  });
  shared.join('k', call.start, () => got.push(3));
  t.throws(() => call.finish('x'), first);
  t.same(got, [0, 3]);
  t.equal(shared.inFlight(), 0);
});

t.test('done is honoured once', async (t) => {
  const shared = createInFlight<string>();
  let saved: ((o: string) => void) | undefined;
  const got: string[] = [];
  shared.join(
    'k',
    (done) => {
      saved = done;
    },
    (o) => got.push(o),
  );
  saved!('one');
  saved!('two');
  t.same(got, ['one']);
});

t.test('done called synchronously inside start', async (t) => {
  const shared = createInFlight<string>();
  const got: string[] = [];
  shared.join(
    'k',
    (done) => done('now'),
    (o) => got.push(o),
  );
  t.same(got, ['now']);
  t.equal(shared.inFlight(), 0);
});

t.test('a start that throws releases the key and tells the leader', async (t) => {
  const shared = createInFlight<string>();
  t.throws(
    () =>
      shared.join(
        'k',
        () => {
          throw new Error('no upstream');
        },
        () => t.fail('not answered'),
      ),
    /no upstream/,
  );
  t.equal(shared.inFlight(), 0);
  const got: string[] = [];
  shared.join(
    'k',
    (done) => done('fresh'),
    (o) => got.push(o),
  );
  t.same(got, ['fresh'], 'the next caller starts afresh');
});

t.test('a follower gets its own id from the shared whole answer', async (t) => {
  const shared = createInFlight<Buffer>();
  const call = controlledStart<Buffer>();
  const clientIds = ['1', '"abc"', 'null', '123456789012345678901234567890'];
  const bodies: string[] = [];
  for (const id of clientIds) shared.join('k', call.start, (answer) => bodies.push(rewriteId(answer, id)!.toString()));
  call.finish(Buffer.from('{"jsonrpc":"2.0","id":77,"result":"0x10"}'));
  t.same(
    bodies,
    clientIds.map((id) => `{"jsonrpc":"2.0","id":${id},"result":"0x10"}`),
  );
});

t.test('dedupKeyFor', async (t) => {
  for (const method of [
    'eth_sendRawTransaction',
    'eth_newFilter',
    'eth_newBlockFilter',
    'eth_newPendingTransactionFilter',
    'eth_getFilterChanges',
    'eth_getFilterLogs',
    'eth_uninstallFilter',
    'eth_subscribe',
    'eth_unsubscribe',
  ])
    t.equal(dedupKeyFor('mainnet', method, []), null, `${method} is never shared`);
  const address = `0x${'Ab'.repeat(20)}`;
  const call = dedupKeyFor('mainnet', 'eth_call', [{ to: address, data: '0x01' }, 'latest']);
  t.equal(call, `"mainnet"["eth_call",{"data":"0x01","to":"${address.toLowerCase()}"},"latest"]`);
  t.equal(
    dedupKeyFor('mainnet', 'eth_call', [{ data: '0x01', to: address.toLowerCase(), gas: null }, 'latest', null]),
    call,
    'member order, hex case and nulls do not matter',
  );
  t.not(dedupKeyFor('sepolia', 'eth_call', [{ to: address, data: '0x01' }, 'latest']), call, 'the chain is in the key');
  t.not(dedupKeyFor('mainnet', 'eth_call', [{ to: address, data: '0x01' }, 'pending']), call, 'the block is in the key');
  t.not(dedupKeyFor('mainnet', 'eth_estimateGas', [{ to: address, data: '0x01' }, 'latest']), call, 'the method is in the key');
  t.equal(dedupKeyFor('mainnet', 'eth_blockNumber', []), '"mainnet"["eth_blockNumber"]');
});

t.test('the registry is renewed under churn without losing a call in flight across the renewal', async (t) => {
  const shared = createInFlight<string>();
  const long = controlledStart<string>();
  const answers: string[] = [];
  shared.join('long', long.start, (o) => answers.push(`leader ${o}`));
  // Many short calls, enough to renew the registry's map a few times, while 'long' stays in flight.
  let short = 0;
  for (let i = 0; i < RENEW_AFTER_SETS * 3 + 7; i++) {
    shared.join(
      `k${i}`,
      (done) => done(`v${i}`),
      () => short++,
    );
  }
  t.equal(short, RENEW_AFTER_SETS * 3 + 7, 'every short call answered');
  t.equal(shared.inFlight(), 1, 'only the long call is in flight');
  shared.join('long', long.start, (o) => answers.push(`follower ${o}`));
  t.equal(long.calls, 1, 'a joiner after the renewals still shares the call in flight');
  long.finish('x');
  t.same(answers, ['leader x', 'follower x']);
  t.equal(shared.inFlight(), 0);
});
