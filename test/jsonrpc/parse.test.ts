import t from 'tap';
import { parseBody, type ParsedBody, type ParsedItem } from '../../src/jsonrpc/parse.js';

const parse = (text: string): ParsedBody => parseBody(Buffer.from(text, 'utf8'));

function single(text: string): ParsedItem {
  const body = parse(text);
  if (body.kind !== 'single') throw new Error(`expected a single request, got ${JSON.stringify(body)}`);
  return body.item;
}

function nested(levels: number): string {
  return '['.repeat(levels) + ']'.repeat(levels);
}

t.test('a plain request', async (t) => {
  t.same(single('{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'), {
    ok: true,
    idText: '1',
    method: 'eth_blockNumber',
    params: [],
    paramsText: '[]',
  });
  t.same(
    single(' \n\t{ "id" : 7 , "method" : "eth_getBalance" , "jsonrpc" : "2.0" , "params" : [ "0xab" , "latest" ] } \r\n'),
    { ok: true, idText: '7', method: 'eth_getBalance', params: ['0xab', 'latest'], paramsText: '[ "0xab" , "latest" ]' },
    'whitespace everywhere',
  );
  t.same(
    single('{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}'),
    { ok: true, idText: '2', method: 'eth_chainId', params: [], paramsText: '[]' },
    'omitted params become []',
  );
  t.same(
    single('{"jsonrpc":"2.0","id":3,"method":"m","params":[],"extra":{"a":[1,2,{"b":"}"}]}}'),
    { ok: true, idText: '3', method: 'm', params: [], paramsText: '[]' },
    'unknown members are ignored',
  );
  t.same(single('{}'), { ok: false, idText: 'null', error: 'invalid_request', message: `invalid request: 'jsonrpc' must be "2.0"` });
});

t.test('ids keep their exact source text', async (t) => {
  const ids = [
    '123456789012345678901234567890',
    '1.0',
    '-0',
    '1e3',
    '1E+400',
    '0',
    '"abc"',
    '"a\\"b"',
    '"\\u00e9t\\u00e9"',
    '"été"',
    '""',
    '"\\\\"',
    '"with } and ] and ,"',
  ];
  for (const id of ids) {
    const item = single(`{"jsonrpc":"2.0","method":"eth_blockNumber","params":[],"id":${id}}`);
    t.equal(item.idText, id, `id ${id} (last member)`);
    t.equal(single(`{"id":${id},"jsonrpc":"2.0","method":"eth_blockNumber"}`).idText, id, `id ${id} (first member)`);
  }
  const body = parse(`[{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"a"} , 5 ,
    {"jsonrpc":"2.0","id":"a\\"b","method":"b","params":[{"x":"]"}]},{"jsonrpc":"2.0","id":1.0,"method":"c"}]`);
  t.same(body, {
    kind: 'batch',
    items: [
      { ok: true, idText: '123456789012345678901234567890', method: 'a', params: [], paramsText: '[]' },
      { ok: false, idText: 'null', error: 'invalid_request', message: 'invalid request: batch element must be a request object' },
      { ok: true, idText: '"a\\"b"', method: 'b', params: [{ x: ']' }], paramsText: '[{"x":"]"}]' },
      { ok: true, idText: '1.0', method: 'c', params: [], paramsText: '[]' },
    ],
  });
});

t.test('invalid ids', async (t) => {
  for (const id of ['null', '{}', '[1]', 'true', 'false']) {
    t.same(
      single(`{"jsonrpc":"2.0","id":${id},"method":"m"}`),
      {
        ok: false,
        idText: 'null',
        error: 'invalid_request',
        message: `invalid request: 'id' must be a number or a string`,
      },
      `id ${id}`,
    );
  }
  t.same(single('{"jsonrpc":"2.0","method":"m"}'), {
    ok: false,
    idText: 'null',
    error: 'invalid_request',
    message: `invalid request: missing 'id' (notifications are not served)`,
  });
});

t.test('request members', async (t) => {
  const refused = (text: string, message: string, idText = '9'): void => {
    t.same(single(text), { ok: false, idText, error: 'invalid_request', message: `invalid request: ${message}` }, text);
  };
  refused('{"jsonrpc":"1.0","id":9,"method":"m"}', `'jsonrpc' must be "2.0"`);
  refused('{"jsonrpc":2.0,"id":9,"method":"m"}', `'jsonrpc' must be "2.0"`);
  refused('{"id":9,"method":"m"}', `'jsonrpc' must be "2.0"`);
  refused('{"jsonrpc":"2.0","id":9,"method":1}', `'method' must be a string`);
  refused('{"jsonrpc":"2.0","id":9}', `'method' must be a string`);
  refused('{"jsonrpc":"2.0","id":9,"method":"m","params":{"a":1}}', `'params' must be an array`);
  refused('{"jsonrpc":"2.0","id":9,"method":"m","params":null}', `'params' must be an array`);
  refused('{"jsonrpc":"2.0","id":9,"method":"m","method":"n"}', `duplicate member 'method'`);
  refused('{"jsonrpc":"2.0","id":9,"method":"m","params":[],"params":[1]}', `duplicate member 'params'`);
  refused('{"jsonrpc":"2.0","jsonrpc":"2.0","id":9,"method":"m"}', `duplicate member 'jsonrpc'`);
  refused('{"jsonrpc":"2.0","id":9,"method":"m","x":1,"x":2}', `duplicate member 'x'`);
  refused('{"jsonrpc":"2.0","id":9,"method":"m","m\\u0065thod":"n"}', `duplicate member 'method'`);
  refused('{"jsonrpc":"2.0","id":9,"id":10,"method":"m"}', `duplicate member 'id'`, 'null');
  t.same(
    single('{"jsonrpc":"2.0","\\u0069d":4,"method":"m"}'),
    { ok: true, idText: '4', method: 'm', params: [], paramsText: '[]' },
    'an escaped member name is the member',
  );
  t.match(
    single('{"jsonrpc":"2.0","id":4,"method":"m","p\\u0061rams":[ "0xAB" ,{"a":"\\u0041"}]}'),
    { ok: true, paramsText: '[ "0xAB" ,{"a":"\\u0041"}]' },
    "params under an escaped name: the client's text as written",
  );
});

t.test('params text: numbers the node would read apart from their value are not forwarded as written', async (t) => {
  const text = (params: string): string | null | undefined => {
    const item = single(`{"jsonrpc":"2.0","id":1,"method":"m","params":${params}}`);
    return item.ok ? item.paramsText : undefined;
  };
  t.equal(text('[10,"latest",[25,75]]'), '[10,"latest",[25,75]]', 'plain integers: as written');
  t.equal(text('[-3, 0, 1.5, true, null, false]'), '[-3, 0, 1.5, true, null, false]', "a number in its value's own form");
  for (const odd of ['1e1', '10.0', '-0', '1E2', '12345678901234567890', '0.10']) {
    t.equal(text(`["0xab",${odd}]`), null, `${odd}: the value's own text is forwarded instead`);
    t.equal(text(`[{"a":[${odd}]}]`), null, `${odd} nested`);
  }
  t.equal(text('["1e1","10.0"]'), '["1e1","10.0"]', 'in strings they are text');
});

t.test('whole-body errors', async (t) => {
  const utf8 = { kind: 'error', error: 'parse_error', message: 'parse error: body is not valid UTF-8' };
  const json = { kind: 'error', error: 'parse_error', message: 'parse error: body is not valid JSON' };
  t.same(parseBody(Buffer.from([0x7b, 0xff, 0x7d])), utf8, 'invalid byte');
  t.same(
    parseBody(Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":"'), Buffer.from([0xc3]), Buffer.from('","method":"m"}')])),
    utf8,
    'truncated sequence inside a string',
  );
  t.same(parseBody(Buffer.from([0xed, 0xa0, 0x80])), utf8, 'encoded surrogate');
  for (const text of ['', '   ', '{', '{"id":1,}', '[1,]', "{'id':1}", '{"a":1} x', 'nul', '\ufeff{}']) {
    t.same(parse(text), json, JSON.stringify(text));
  }
  t.same(parse('[]'), { kind: 'error', error: 'invalid_request', message: 'invalid request: empty batch' });
  t.same(parse(' [ \n ] '), { kind: 'error', error: 'invalid_request', message: 'invalid request: empty batch' });
  for (const text of ['1', '"x"', 'null', 'true']) {
    t.same(
      parse(text),
      {
        kind: 'error',
        error: 'invalid_request',
        message: 'invalid request: body must be a request object or a batch array',
      },
      text,
    );
  }
});

t.test('batches', async (t) => {
  const body = parse('[1,"x",null,[],{"jsonrpc":"2.0","id":"q","method":"m","params":[[1],{"a":{"b":[]}}]},true,{}]');
  if (body.kind !== 'batch') throw new Error('expected a batch');
  t.equal(body.items.length, 7);
  for (const k of [0, 1, 2, 3, 5]) {
    t.same(
      body.items[k],
      {
        ok: false,
        idText: 'null',
        error: 'invalid_request',
        message: 'invalid request: batch element must be a request object',
      },
      `element ${k}`,
    );
  }
  t.same(body.items[4], { ok: true, idText: '"q"', method: 'm', params: [[1], { a: { b: [] } }], paramsText: '[[1],{"a":{"b":[]}}]' });
  t.match(body.items[6], { ok: false, error: 'invalid_request' });
  const one = parse('[{"jsonrpc":"2.0","id":1,"method":"m"}]');
  t.same(
    one,
    { kind: 'batch', items: [{ ok: true, idText: '1', method: 'm', params: [], paramsText: '[]' }] },
    'a batch of one stays a batch',
  );
});

t.test('params depth', async (t) => {
  const at = (params: string): ParsedItem => single(`{"jsonrpc":"2.0","id":1,"method":"m","params":${params}}`);
  t.equal(at(nested(32)).ok, true, '32 levels of arrays');
  t.same(at(nested(33)), {
    ok: false,
    idText: '1',
    error: 'invalid_params',
    message: 'invalid params: nested deeper than 32 levels',
  });
  const objects = (levels: number): string => `[${'{"a":'.repeat(levels - 1)}1${'}'.repeat(levels - 1)}]`;
  t.equal(at(objects(32)).ok, true, '32 levels of objects');
  t.match(at(objects(33)), { ok: false, error: 'invalid_params' });
  t.match(at(`[1, "[[[[", ${nested(31)}]`), { ok: true }, 'brackets inside strings do not count');
  t.match(at(`[1, ${nested(32)}]`), { ok: false, error: 'invalid_params' });
  const deepElsewhere = `{"jsonrpc":"2.0","id":1,"method":"m","params":[],"x":${nested(5000)}}`;
  t.match(single(deepElsewhere), { ok: true }, 'depth outside params is not limited');
  const deepBatch = parse(`[{"jsonrpc":"2.0","id":1,"method":"m","params":${nested(40)}},{"jsonrpc":"2.0","id":2,"method":"n"}]`);
  t.match(
    deepBatch,
    {
      kind: 'batch',
      items: [
        { ok: false, error: 'invalid_params' },
        { ok: true, idText: '2', method: 'n' },
      ],
    },
    'the scan resumes after refused params',
  );
});

t.test('duplicate members inside params', async (t) => {
  const at = (params: string): ParsedItem => single(`{"jsonrpc":"2.0","id":"k","method":"eth_call","params":${params}}`);
  t.same(at('[{"to":"0x1","data":"0x","to":"0x2"}]'), {
    ok: false,
    idText: '"k"',
    error: 'invalid_params',
    message: `invalid params: duplicate member 'to'`,
  });
  t.match(at('[{"a":{"b":1,"c":{"d":1,"d":2}}}]'), { ok: false, message: `invalid params: duplicate member 'd'` });
  t.match(at('[{"to":1,"t\\u006f":2}]'), { ok: false, message: `invalid params: duplicate member 'to'` });
  t.match(at('[{"a":1},{"a":1}]'), { ok: true }, 'the same name in sibling objects');
  t.match(at('[{"a":{"a":1}}]'), { ok: true }, 'the same name at different levels');
  const many = Array.from({ length: 40 }, (_, k) => `"k${k}":${k}`);
  t.match(at(`[{${many.join(',')}}]`), { ok: true }, 'many distinct members');
  t.match(at(`[{${many.join(',')},"k3":0}]`), { ok: false, message: `invalid params: duplicate member 'k3'` });
  t.match(at(`[{${many.join(',')},"k39":0}]`), { ok: false, message: `invalid params: duplicate member 'k39'` });
});
