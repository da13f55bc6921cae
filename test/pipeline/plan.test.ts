/**
 * planItem's fixed order of checks for one parsed item (rate limit → method and params → RU rate and
 * balance → answer or forward), with the bytes it answers and the usage it writes in a real ledger; and
 * collectCall, which forwards a planned call to a real anvil and settles its RU by the answer's size.
 */
import t from 'tap';
import { ERRORS } from '../../src/errors.js';
import { parseBody, type ParsedItem } from '../../src/jsonrpc/parse.js';
import { collectCall, type Forward, type ItemPlan, type PlannedAnswer, planItem, resultBody } from '../../src/pipeline/plan.js';
import { Wallet } from 'ethers';
import { compileFences } from '../../src/fences/fences.js';
import { applyFencePatch, NO_FENCES } from '../../src/fences/settings.js';
import type { Caller } from '../../src/pipeline/admission.js';
import { fakeUpstream } from '../support/fake-upstream.js';
import { anvilFor } from '../support/gateway.js';
import { DEV_ADDRESS } from '../support/dev-chain.js';
import { keyedCaller, pipelineContext, type PipelineSetup, publicCaller, storedBalance, usageRows } from '../support/pipeline-context.js';

/** The parsed item of one request object. */
function item(request: Record<string, unknown>): ParsedItem {
  const parsed = parseBody(Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...request })));
  if (parsed.kind !== 'single') throw new Error('not a single request');
  return parsed.item;
}

const call = (id: number, method: string, params: unknown[] = []): ParsedItem => item({ id, method, params });

function devnetOnly(url = 'http://127.0.0.1:1'): Record<string, unknown> {
  return { chains: { devnet: { chain_id: 31337, max_logs_block_range: 100, upstreams: [{ url }] } } };
}

function answerOf(plan: ItemPlan): { answer: string; outcome: string; retryAfterMs?: number } {
  if (plan.kind !== 'answer') throw new Error(`not answered at once: ${plan.kind}`);
  const { answer, outcome, retryAfterMs } = plan;
  return retryAfterMs === undefined ? { answer, outcome } : { answer, outcome, retryAfterMs };
}

t.test('the rate limit comes first and counts every item, valid or not', async (t) => {
  const s = pipelineContext(t, devnetOnly());
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 100 });
  const limited = { ...caller, rps: 2 };
  const plan = (it: ParsedItem): ItemPlan => planItem(s.ctx, s.chain('devnet'), limited, it, 'http');
  t.same(plan(call(1, 'eth_chainId')), { kind: 'answer', answer: '{"jsonrpc":"2.0","id":1,"result":"0x7a69"}', outcome: 'ok' });
  t.same(plan(item({ id: 2, params: [] })), {
    kind: 'answer',
    answer: '{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"invalid request: \'method\' must be a string"}}',
    outcome: 'invalid_request',
  });
  const { retryAfterMs, ...refused } = answerOf(plan(call(3, 'eth_chainId')));
  t.same(refused, { answer: '{"jsonrpc":"2.0","id":3,"error":{"code":-32005,"message":"Rate limit exceeded"}}', outcome: 'rate_limited' });
  t.ok(retryAfterMs! > 0 && retryAfterMs! <= 1000, `with the wait (${retryAfterMs} ms)`);
  t.match(answerOf(plan(call(4, 'no_such_method'))), { outcome: 'rate_limited' }, 'even a call that would fail its checks');
  s.clock.now += 1000;
  t.match(answerOf(plan(call(5, 'eth_chainId'))), { outcome: 'ok' }, 'a second later');
  const endpointId = caller.auth!.endpointId;
  t.same(usageRows(s), [
    { owner_id: ownerId, endpoint_id: endpointId, method: '(invalid)', status: -32600, requests: 1, ru: 0 },
    { owner_id: ownerId, endpoint_id: endpointId, method: 'eth_chainId', status: 0, requests: 2, ru: 10 },
    { owner_id: ownerId, endpoint_id: endpointId, method: 'eth_chainId', status: 429, requests: 1, ru: 0 },
    { owner_id: ownerId, endpoint_id: endpointId, method: 'no_such_method', status: 429, requests: 1, ru: 0 },
  ]);
});

t.test('method and params are checked before the balance; refusals cost nothing', async (t) => {
  const s = pipelineContext(t, devnetOnly());
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 0 });
  const devnet = s.chain('devnet');
  devnet.head.note(5000);
  const cases: Array<[string, ParsedItem, string, string]> = [
    ['an unknown method', call(1, 'eth_mine'), 'method_not_found', 'Method not found: eth_mine is not served by this gateway'],
    [
      'a subscription over HTTP',
      call(2, 'eth_subscribe', ['newHeads']),
      'method_not_found',
      'eth_subscribe needs a WebSocket connection: open the same URL with wss:// (or ws://)',
    ],
    ['a bad address', call(3, 'eth_getBalance', ['0x1234']), 'invalid_params', ''],
    [
      'a log range over max_logs_block_range',
      call(4, 'eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x65' }]),
      'invalid_params',
      'eth_getLogs block range of 101 blocks is larger than the limit of 100 (chains.devnet.max_logs_block_range)',
    ],
    [
      'an open-ended range counts to the head',
      call(5, 'eth_newFilter', [{ fromBlock: '0x1000' }]),
      'invalid_params',
      'eth_getLogs block range of 905 blocks is larger than the limit of 100 (chains.devnet.max_logs_block_range)',
    ],
    [
      'a pending filter of whole transactions',
      call(6, 'eth_newPendingTransactionFilter', [true]),
      'invalid_params',
      "eth_newPendingTransactionFilter with fullTransactions is not served: the gateway's filters report transaction hashes; " +
        "use eth_subscribe('newPendingTransactions', true) over a WebSocket for whole transactions",
    ],
    ['a valid call without the RU for it', call(7, 'eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x64' }]), 'insufficient_balance', ''],
  ];
  for (const [why, it, error, message] of cases) {
    const got = answerOf(planItem(s.ctx, devnet, caller, it, 'http'));
    t.equal(got.outcome, error, why);
    const body = JSON.parse(got.answer) as { id: number; error: { code: number; message: string } };
    t.same([body.id, body.error.code], [Number(it.idText), ERRORS[error as keyof typeof ERRORS].rpc], `${why}: its id and code`);
    if (message !== '') t.equal(body.error.message, message);
    else if (error === 'invalid_params') t.match(body.error.message, /^invalid params: /);
  }
  const statuses = usageRows(s).map((r) => `${r.method} ${r.status} ${r.ru}`);
  t.same(
    statuses,
    [
      'eth_getBalance -32602 0',
      'eth_getLogs -32602 0',
      'eth_getLogs 402 0',
      'eth_mine -32601 0',
      'eth_newFilter -32602 0',
      'eth_newPendingTransactionFilter -32602 0',
      'eth_subscribe -32601 0',
    ],
    'each refusal counted under its status: the JSON-RPC code, or the HTTP status of a limit',
  );
  t.equal(storedBalance(s, ownerId), 0);
});

t.test(
  'an admitted call: answered locally and charged, forwarded with its RU set aside, or left to the connection or the filters',
  async (t) => {
    const s = pipelineContext(t, devnetOnly());
    const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 1000 });
    const devnet = s.chain('devnet');
    const ledger = s.ctx.tenancy.ledger;

    t.same(
      planItem(s.ctx, devnet, caller, call(1, 'eth_chainId'), 'ws'),
      { kind: 'answer', answer: resultBody('1', '"0x7a69"'), outcome: 'ok' },
      'eth_chainId: answered here',
    );
    t.equal(ledger.available(ownerId), 995, 'and charged its 5 RU');

    const forwarded = planItem(s.ctx, devnet, caller, item({ id: 'a', method: 'eth_getBalance', params: [DEV_ADDRESS] }), 'http');
    t.match(
      forwarded,
      {
        forward: {
          method: 'eth_getBalance',
          params: [DEV_ADDRESS, 'latest'],
          paramsJson: `["${DEV_ADDRESS}","latest"]`,
          idText: '"a"',
          admission: { ok: true, ru: 15, reservation: { ownerId, ru: 15 } },
          watch: null,
        },
      },
      'the params as forwarded, the omitted block filled in; no transaction to watch',
    );
    t.equal(ledger.available(ownerId), 980, 'its RU reserved, not yet charged');

    const asSent = `[ "${DEV_ADDRESS.toUpperCase().replace('0X', '0x')}" ,\n "latest" ]`;
    const spaced = parseBody(Buffer.from(`{"jsonrpc":"2.0","id":5,"method":"eth_getBalance","params":${asSent}}`));
    if (spaced.kind !== 'single') throw new Error('not a single request');
    t.match(
      planItem(s.ctx, devnet, caller, spaced.item, 'http'),
      { forward: { params: [DEV_ADDRESS.toUpperCase().replace('0X', '0x'), 'latest'], paramsJson: asSent } },
      "params the checks leave as they came: forwarded as the client's text, spaces and case kept",
    );

    const sub = planItem(s.ctx, devnet, caller, call(2, 'eth_subscribe', ['newHeads']), 'ws');
    t.match(
      sub,
      { local: { method: 'eth_subscribe', params: ['newHeads'], idText: '2', admission: { ok: true, ru: 10 } } },
      "a subscription over a WebSocket is the connection's",
    );

    const filter = planItem(s.ctx, devnet, caller, call(3, 'eth_newBlockFilter'), 'http');
    if (filter.kind !== 'pending') throw new Error("a filter call is answered by the gateway's filters");
    const answered: PlannedAnswer = await filter.pending;
    t.match(answered, { answer: /^\{"jsonrpc":"2.0","id":3,"result":"0x[0-9a-f]+"\}$/, outcome: 'ok' });

    const pub = planItem(s.ctx, devnet, publicCaller(s), call(4, 'eth_getBalance', [DEV_ADDRESS, 'latest']), 'http');
    t.match(pub, { forward: { admission: { ok: true, reservation: null, ru: 15 } } }, 'a public call is priced, never reserved');
  },
);

t.test('an eth_getLogs range is checked against the head only when one is known (fail-open)', async (t) => {
  const s = pipelineContext(t, devnetOnly());
  const devnet = s.chain('devnet');
  const wide = call(1, 'eth_getLogs', [{ fromBlock: '0x0' }]);
  t.match(planItem(s.ctx, devnet, publicCaller(s), wide, 'http'), { forward: { method: 'eth_getLogs' } }, 'no head: forwarded');
  devnet.head.note(100);
  t.match(
    planItem(s.ctx, devnet, publicCaller(s), wide, 'http'),
    { answer: /block range of 101 blocks/, outcome: 'invalid_params' },
    'head 100: 101 blocks',
  );
});

/** collectCall's answer for one planned forward. */
function collect(
  s: PipelineSetup,
  slug: string,
  caller: ReturnType<typeof keyedCaller>['caller'],
  f: Forward,
  maxBytes?: number,
): Promise<{ answer: string; outcome: string }> {
  return new Promise((resolve) => {
    collectCall(
      s.ctx,
      s.chain(slug),
      caller,
      f,
      (answer, outcome) => resolve({ answer: answer.toString(), outcome }),
      maxBytes,
      'websocket.max_answer_bytes',
    );
  });
}

function forwardOf(plan: ItemPlan): Forward {
  if (plan.kind !== 'forward') throw new Error('not forwarded');
  return plan.forward;
}

/** Runtime code that returns `bytes` zero bytes: PUSH3 bytes, PUSH1 0, RETURN. */
const returnsZeros = (bytes: number): string => `0x62${bytes.toString(16).padStart(6, '0')}6000f3`;
const BIG = '0x00000000000000000000000000000000000000b1';

t.test("collectCall: a real node's answer, whole or large, charged by its size; too large for the limit, refunded", async (t) => {
  const node = await anvilFor(t);
  const s = pipelineContext(t, devnetOnly(node.url));
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 1000 });
  const ru = s.ctx.tenancy.ruCost('eth_call');
  const plan = (id: number, bytes: number): Forward =>
    forwardOf(
      planItem(
        s.ctx,
        s.chain('devnet'),
        caller,
        call(id, 'eth_call', [{ to: BIG, data: '0x' }, 'latest', { [BIG]: { code: returnsZeros(bytes) } }]),
        'ws',
      ),
    );

  const small = await collect(s, 'devnet', caller, plan(1, 32));
  t.same(
    small,
    { answer: `{"jsonrpc":"2.0","id":1,"result":"0x${'0'.repeat(64)}"}`, outcome: 'ok' },
    "a whole answer, with the client's id",
  );

  const large = await collect(s, 'devnet', caller, plan(2, 600_000));
  t.equal(large.outcome, 'ok');
  t.equal(large.answer, `{"jsonrpc":"2.0","id":2,"result":"0x${'0'.repeat(1_200_000)}"}`, 'a streamed answer collected whole');

  const tooLarge = await collect(s, 'devnet', caller, plan(3, 600_000), 1_000_000);
  t.same(tooLarge, {
    answer:
      '{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"The answer is larger than the limit of 1000000 bytes (websocket.max_answer_bytes); ask for less, or use HTTP, which streams"}}',
    outcome: 'upstream_error',
  });
  await new Promise((r) => setTimeout(r, 50));
  const endpointId = caller.auth!.endpointId;
  t.same(
    usageRows(s),
    [
      { owner_id: ownerId, endpoint_id: endpointId, method: 'eth_call', status: 0, requests: 2, ru: ru + 2 * ru },
      { owner_id: ownerId, endpoint_id: endpointId, method: 'eth_call', status: 502, requests: 1, ru: 0 },
    ],
    'the 1.2 MB answer costs twice; the one over the limit nothing',
  );
  t.equal(storedBalance(s, ownerId), 1000 - 3 * ru);
});

t.test('collectCall: an upstream failure is a 502 answer, refunded and logged for the upstream', async (t) => {
  const broken = await fakeUpstream(t, 'http-500');
  const s = pipelineContext(t, devnetOnly(broken.url));
  const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 100 });
  const f = forwardOf(planItem(s.ctx, s.chain('devnet'), caller, call(9, 'eth_getBalance', [DEV_ADDRESS, 'latest']), 'ws'));
  t.same(await collect(s, 'devnet', caller, f), {
    answer: '{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"Upstream node error"}}',
    outcome: 'upstream_error',
  });
  t.equal(broken.requests.length, 1, 'the node was asked once (no other to try)');
  t.same(
    usageRows(s).map((r) => [r.method, r.status, r.ru]),
    [['eth_getBalance', 502, 0]],
  );
  t.equal(storedBalance(s, ownerId), 100);
  t.same(
    s.logLines.filter((l) => l.includes('upstream calls fail')),
    [`warn upstream calls fail chain=devnet upstream=${new URL(broken.url).host} reason="upstream answered HTTP 500"`],
    'the failure is logged with its chain, upstream and reason',
  );
});

t.test(
  "a key's methods are checked before params, its contracts after them; both free; a raw transaction may wait for its decoder",
  async (t) => {
    const node = await anvilFor(t);
    const s = pipelineContext(t, devnetOnly(node.url));
    const { caller, ownerId } = keyedCaller(s, 'devnet', { ru: 1000 });
    const other = '0x5fbdb2315678afecb367f032d93f642f64180aa3';
    const wallet = new Wallet('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
    const sign = (to: string, nonce: number) =>
      wallet.signTransaction({ to, nonce, chainId: 31337, gasLimit: 21_000, gasPrice: 10n ** 10n, type: 0 });
    const [toAllowed, toOther] = [await sign(DEV_ADDRESS, 0), await sign(other, 0)];
    const read = applyFencePatch(NO_FENCES, { allowed_methods: ['eth_call', 'eth_sendRawTransaction'], allowed_contracts: [DEV_ADDRESS] });
    if (!read.ok) throw new Error('settings');
    // compileFences starts loading the transaction decoder; nothing is awaited before the two raw transactions
    // are planned, so both checks wait for it (a pending answer each).
    const fenced: Caller = { ...caller, auth: { ...caller.auth!, fences: compileFences(read.settings) } };
    const plan = (it: ParsedItem): ItemPlan => planItem(s.ctx, s.chain('devnet'), fenced, it, 'http');
    const refusedLater = plan(call(4, 'eth_sendRawTransaction', [toOther]));
    const sentLater = plan(call(5, 'eth_sendRawTransaction', [toAllowed]));
    if (refusedLater.kind !== 'pending' || sentLater.kind !== 'pending') throw new Error('the decoder loaded at once');
    t.same(
      answerOf(plan(call(1, 'eth_getBalance', ['not an address']))),
      {
        answer: '{"jsonrpc":"2.0","id":1,"error":{"code":-32004,"message":"Method eth_getBalance is not allowed for this key"}}',
        outcome: 'method_not_allowed_for_key',
      },
      'the method before its (invalid) params',
    );
    t.match(answerOf(plan(call(2, 'eth_call', [{ to: 'nope' }, 'latest']))), { outcome: 'invalid_params' }, 'params before contracts');
    t.same(answerOf(plan(call(3, 'eth_call', [{ to: other }, 'latest']))), {
      answer: `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"eth_call: contract ${other} is not allowed for this key"}}`,
      outcome: 'contract_not_allowed',
    });
    t.match(await refusedLater.pending, { outcome: 'contract_not_allowed', answer: /"id":4,.*eth_sendRawTransaction: contract/ });
    const sent: PlannedAnswer = await sentLater.pending;
    t.match(
      { outcome: sent.outcome, answer: String(sent.answer) },
      { outcome: 'ok', answer: /"id":5,"result":"0x[0-9a-f]{64}"/ },
      'the allowed one is planned on and sent',
    );
    t.match(answerOf(plan(call(6, 'eth_sendRawTransaction', [toOther]))), { outcome: 'contract_not_allowed' }, 'once loaded, at once');
    t.equal(1000 - storedBalance(s, ownerId), s.ctx.tenancy.ruCost('eth_sendRawTransaction'), 'only the transaction sent is charged');
    t.match(usageRows(s), [
      { method: 'eth_call', status: -32602, requests: 1 },
      { method: 'eth_call', status: 403, requests: 1 },
      { method: 'eth_getBalance', status: -32004, requests: 1 },
      { method: 'eth_sendRawTransaction', status: 0, requests: 1 },
      { method: 'eth_sendRawTransaction', status: 403, requests: 2 },
    ]);
  },
);
