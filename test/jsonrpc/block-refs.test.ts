/**
 * Where each catalogue method names its block (MethodRow.blockSite), the head a call asks of its node, and the
 * call with its tags written as numbers (jsonrpc/block-refs.ts). The table is checked against the whole
 * catalogue: every method with a parameter that takes a block tag, or a filter with block ends, has its site.
 */
import t from 'tap';
import { type BlockSite, headForCall, rewriteTags, type TagBlocks } from '../../src/jsonrpc/block-refs.js';
import { ALLOWED_METHODS, methodRow } from '../../src/jsonrpc/methods.js';

const HASH = `0x${'ab'.repeat(32)}`;
const ADDRESS = '0x000000000000000000000000000000000000dead';
const CALL = { to: ADDRESS, data: '0x' };

/** A chain at served head 100, safe 90, finalized 80; `known: false`: none of them known yet. */
function tagsAt(known = true): TagBlocks & { reads: string[] } {
  const reads: string[] = [];
  const read = (name: string, n: number) => () => {
    reads.push(name);
    return known ? n : null;
  };
  return { reads, latest: read('latest', 100), safe: read('safe', 90), finalized: read('finalized', 80) };
}

function siteOf(method: string): BlockSite | null {
  return methodRow(method)!.blockSite;
}

/** Whether a parameter's check reads a value as a block: it takes `latest`. */
const takesTag = (check: (v: unknown, name: string) => string | undefined): boolean => check('latest', 'p') === undefined;
/** Whether it reads an object's ends as blocks: `{toBlock: latest}` passes and `{toBlock: 'nope'}` does not. */
const takesFilter = (check: (v: unknown, name: string) => string | undefined): boolean =>
  check({ toBlock: 'latest' }, 'p') === undefined && check({ toBlock: 'nope' }, 'p') !== undefined;

t.test('every catalogue method with a block parameter has its site, found from its parameter rules', async (t) => {
  let withBlock = 0;
  for (const method of ALLOWED_METHODS) {
    const row = methodRow(method)!;
    const site = row.blockSite;
    if (site?.kind === 'head') continue;
    const tagAt = row.params.findIndex((p) => takesTag(p.check));
    const filterAt = row.params.findIndex((p) => takesFilter(p.check));
    if (tagAt >= 0) {
      withBlock++;
      t.same(site, { kind: 'param', at: tagAt }, `${method}: its block is params[${tagAt}]`);
    } else if (filterAt >= 0) {
      withBlock++;
      t.same(site, { kind: method === 'trace_filter' ? 'traces' : 'logs', at: filterAt }, `${method}: a filter at params[${filterAt}]`);
    } else {
      t.equal(site, null, `${method} names no block`);
    }
  }
  t.ok(withBlock >= 25, `the catalogue's methods with a block: ${withBlock}`);
});

t.test('the sites of some methods, spelled out', async (t) => {
  t.same(siteOf('eth_getBalance'), { kind: 'param', at: 1 });
  t.same(siteOf('eth_getStorageAt'), { kind: 'param', at: 2 });
  t.same(siteOf('eth_feeHistory'), { kind: 'param', at: 1 }, "feeHistory's newest block");
  t.same(siteOf('eth_getStorageValues'), { kind: 'param', at: 1 }, 'a block parameter even when not marked a state read');
  t.same(siteOf('eth_getBlockByNumber'), { kind: 'param', at: 0 });
  t.same(siteOf('eth_getBlockReceipts'), { kind: 'param', at: 0 });
  t.same(siteOf('debug_traceBlockByNumber'), { kind: 'param', at: 0 });
  t.same(siteOf('trace_call'), { kind: 'param', at: 2 });
  t.same(siteOf('trace_block'), { kind: 'param', at: 0 });
  t.same(siteOf('eth_getLogs'), { kind: 'logs', at: 0 });
  t.same(siteOf('eth_newFilter'), { kind: 'logs', at: 0 });
  t.same(siteOf('trace_filter'), { kind: 'traces', at: 0 });
  for (const m of ['eth_blockNumber', 'eth_gasPrice', 'eth_maxPriorityFeePerGas', 'eth_blobBaseFee', 'eth_baseFee'])
    t.same(siteOf(m), { kind: 'head' }, `${m} is about the head`);
  for (const m of ['eth_getBlockByHash', 'eth_getTransactionReceipt', 'eth_getTransactionByHash', 'eth_chainId', 'eth_subscribe'])
    t.equal(siteOf(m), null, `${m} names no block`);
  t.equal(siteOf('eth_getBalance'), siteOf('eth_getBalance'), 'made once per method');
});

t.test('the head a call asks of its node', async (t) => {
  const tags = tagsAt();
  const head = (method: string, params: unknown[]): number | null => headForCall(siteOf(method)!, params, tags);
  t.equal(head('eth_getBalance', [ADDRESS, 'latest']), 100, 'latest: the served head');
  t.equal(head('eth_getBalance', [ADDRESS, 'pending']), 100, 'pending: the served head');
  t.equal(head('eth_getBalance', [ADDRESS]), 100, 'omitted: the served head');
  t.equal(head('eth_getBalance', [ADDRESS, 'safe']), 90);
  t.equal(head('eth_getBalance', [ADDRESS, 'finalized']), 80);
  t.equal(head('eth_getBalance', [ADDRESS, 'earliest']), null, 'earliest: every node has it');
  t.equal(head('eth_getBalance', [ADDRESS, '0x7b']), 123, 'a number: itself');
  t.equal(head('eth_getBalance', [ADDRESS, HASH]), null, 'a hash: none');
  t.equal(head('eth_getBalance', [ADDRESS, { blockHash: HASH }]), null);
  t.equal(head('eth_getBalance', [ADDRESS, { blockNumber: '0x10' }]), 16);
  t.equal(head('eth_getBalance', [ADDRESS, { blockNumber: 'safe' }]), 90);
  t.equal(head('eth_call', [CALL, '0x5']), 5);
  t.equal(head('eth_getBlockByNumber', ['latest', false]), 100);
  t.equal(head('eth_feeHistory', ['0x4', '0x20', []]), 32);
  t.equal(head('eth_blockNumber', []), 100, 'about the head');
  t.equal(head('eth_getLogs', [{}]), 100, 'a filter with no ends: latest');
  t.equal(head('eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x9' }]), 9, 'its toBlock');
  t.equal(head('eth_getLogs', [{ fromBlock: '0x1' }]), 100, 'an omitted toBlock is latest');
  t.equal(head('eth_getLogs', [{ fromBlock: 'finalized', toBlock: 'safe' }]), 90);
  t.equal(head('eth_getLogs', [{ blockHash: HASH }]), null, 'by hash: none');
  t.equal(head('trace_filter', [{ toBlock: '0x3' }]), 3, "trace_filter's omitted fromBlock is the genesis");
  t.equal(head('eth_getLogs', [{ toBlock: '0x3' }]), 100, "eth_getLogs' omitted fromBlock is latest");

  const unknown = tagsAt(false);
  t.equal(headForCall(siteOf('eth_getBalance')!, [ADDRESS, 'safe'], unknown), null, 'safe not known: none');
  t.equal(headForCall(siteOf('eth_getBalance')!, [ADDRESS, 'latest'], unknown), null, 'no served head yet: none');
  t.equal(headForCall(siteOf('eth_getBalance')!, [ADDRESS, '0x3'], unknown), 3, 'a number needs nothing known');
  t.same(unknown.reads, ['safe', 'latest'], 'a tag is resolved only when a call names it');
});

t.test("tags written as the chain's numbers", async (t) => {
  const tags = tagsAt();
  const all = (method: string, params: unknown[]): unknown[] | null => rewriteTags(siteOf(method)!, params, tags, 'all');
  const final = (method: string, params: unknown[]): unknown[] | null => rewriteTags(siteOf(method)!, params, tags, 'final');
  t.same(all('eth_getBalance', [ADDRESS, 'latest']), [ADDRESS, '0x64'], 'latest: the served head in hex');
  t.same(all('eth_getBalance', [ADDRESS]), [ADDRESS, '0x64'], 'an omitted block is appended');
  t.same(all('eth_call', [CALL]), [CALL, '0x64']);
  t.same(all('eth_getBalance', [ADDRESS, 'safe']), [ADDRESS, '0x5a']);
  t.same(all('eth_getBalance', [ADDRESS, 'finalized']), [ADDRESS, '0x50']);
  t.equal(all('eth_getBalance', [ADDRESS, 'pending']), null, 'pending stays: no block is it yet');
  t.equal(all('eth_getBalance', [ADDRESS, 'earliest']), null);
  t.equal(all('eth_getBalance', [ADDRESS, '0x3']), null, 'a number stays');
  t.equal(all('eth_getBalance', [ADDRESS, HASH]), null, 'a hash stays');
  t.same(all('eth_getBalance', [ADDRESS, { blockNumber: 'latest' }]), [ADDRESS, { blockNumber: '0x64' }]);
  t.equal(all('eth_getBalance', [ADDRESS, { blockHash: HASH }]), null);
  t.same(all('eth_getBlockByNumber', ['latest', true]), ['0x64', true]);
  t.same(all('eth_feeHistory', ['0x4', 'latest', [50]]), ['0x4', '0x64', [50]]);
  t.equal(all('eth_blockNumber', []), null, 'nothing to write in a call about the head');
  t.same(all('eth_getLogs', [{ address: ADDRESS }]), [{ address: ADDRESS, fromBlock: '0x64', toBlock: '0x64' }], 'both omitted ends');
  t.same(all('eth_getLogs', [{ fromBlock: '0x1', toBlock: 'latest' }]), [{ fromBlock: '0x1', toBlock: '0x64' }]);
  t.same(all('eth_getLogs', [{ fromBlock: 'safe', toBlock: '0x99' }]), [{ fromBlock: '0x5a', toBlock: '0x99' }]);
  t.equal(all('eth_getLogs', [{ blockHash: HASH }]), null, 'by hash: unchanged');
  t.same(all('trace_filter', [{ count: 2 }]), [{ count: 2, toBlock: '0x64' }], "trace_filter's omitted fromBlock stays the genesis");

  t.equal(final('eth_getBalance', [ADDRESS, 'latest']), null, "'final': latest stays");
  t.equal(final('eth_getBalance', [ADDRESS]), null);
  t.same(final('eth_getBalance', [ADDRESS, 'finalized']), [ADDRESS, '0x50'], "'final': finalized is the chain's");
  t.same(final('eth_getLogs', [{ fromBlock: 'finalized' }]), [{ fromBlock: '0x50' }], 'an omitted toBlock stays latest');

  const params = [ADDRESS, 'latest'];
  all('eth_getBalance', params);
  t.same(params, [ADDRESS, 'latest'], "the caller's params are left as they are");
  const unknown = tagsAt(false);
  t.equal(rewriteTags(siteOf('eth_getBalance')!, [ADDRESS, 'safe'], unknown, 'all'), null, 'a tag not known yet stays');
  t.equal(rewriteTags(siteOf('eth_getBalance')!, [ADDRESS, 'latest'], unknown, 'all'), null);
});
