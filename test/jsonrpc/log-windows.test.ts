import t from 'tap';
import { arrayItems, mergedLogsAnswer, windowCount, windowFilter } from '../../src/jsonrpc/log-windows.js';

t.test('windowCount: windows of at most `size` blocks, both ends included', async (t) => {
  t.equal(windowCount(0, 49_999, 5_000), 10);
  t.equal(windowCount(0, 50_000, 5_000), 11, 'one block more is one window more');
  t.equal(windowCount(7, 7, 100), 1, 'one block');
  t.equal(windowCount(100, 5, 10), 1, "a reversed range is one window, the node's to answer");
});

t.test('windowFilter: the same filter over one window, ends as quantities', async (t) => {
  const filter = { fromBlock: 'earliest', toBlock: 'latest', address: '0xab', topics: [null] };
  t.same(windowFilter(filter, 10, 25, 10, 0), { fromBlock: '0xa', toBlock: '0x13', address: '0xab', topics: [null] });
  t.same(
    windowFilter(filter, 10, 25, 10, 1),
    { fromBlock: '0x14', toBlock: '0x19', address: '0xab', topics: [null] },
    'the last is cut at the end',
  );
  t.same(windowFilter(filter, 30, 20, 10, 0), { fromBlock: '0x1e', toBlock: '0x14', address: '0xab', topics: [null] }, 'reversed as asked');
  t.equal(filter.fromBlock, 'earliest', 'the filter itself is left as it was');
});

t.test('arrayItems: what is between the brackets, or null for anything else', async (t) => {
  const items = (s: string): string | null => arrayItems(Buffer.from(s))?.toString() ?? null;
  t.equal(items('[]'), '');
  t.equal(items(' [ \n ] '), '', 'an empty array with whitespace');
  t.equal(items('[{"a":1},{"b":[2]}]'), '{"a":1},{"b":[2]}');
  t.equal(items('\n[ {"a":1} ]\n'), '{"a":1}');
  for (const other of ['null', '{}', '"[]"', '[', ']', '', '  ']) t.equal(items(other), null, `${JSON.stringify(other)} is not an array`);
});

t.test('mergedLogsAnswer: one answer with every window in order, empty windows left out', async (t) => {
  const merged = (idText: string, parts: string[]): unknown =>
    JSON.parse(
      mergedLogsAnswer(
        idText,
        parts.map((p) => Buffer.from(p)),
      ).toString(),
    );
  t.same(merged('1', []), { jsonrpc: '2.0', id: 1, result: [] });
  t.same(merged('"x"', ['', '', '']), { jsonrpc: '2.0', id: 'x', result: [] });
  t.same(merged('7', ['', '{"n":1},{"n":2}', '', '{"n":3}', '']), { jsonrpc: '2.0', id: 7, result: [{ n: 1 }, { n: 2 }, { n: 3 }] });
  t.equal(mergedLogsAnswer('null', [Buffer.from('1'), Buffer.from('2')]).toString(), '{"jsonrpc":"2.0","id":null,"result":[1,2]}');
});
