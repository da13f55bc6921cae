import t from 'tap';
import { BEACON_ROUTES, matchBeaconPath, type BeaconMatch } from '../../src/beacon/paths.js';

const ROOT = `0x${'ab'.repeat(32)}`;
const PUBKEY = `0x${'93'.repeat(48)}`;
const EXAMPLE: Record<string, string> = { state_id: 'head', block_id: 'finalized', validator_id: '42', epoch: '7', slot: '123' };

/** The concrete path a client would send for `template`, with `values` overriding the example parameters. */
function fill(template: string, values: Record<string, string> = {}): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = values[name] ?? EXAMPLE[name];
    if (value === undefined) throw new Error(`no example for ${name}`);
    return value;
  });
}

const methodsOf = (template: string): string[] =>
  BEACON_ROUTES.filter((r) => r.template === template)
    .map((r) => r.method)
    .sort();
const TEMPLATES = [...new Set(BEACON_ROUTES.map((r) => r.template))];

t.test('the allowlist holds the spec tables, the POST forms and the successors, and nothing twice', async (t) => {
  const rows = BEACON_ROUTES.map((r) => `${r.method} ${r.template}`);
  t.equal(new Set(rows).size, rows.length, 'no duplicate rows');
  const expected = [
    'GET /eth/v1/node/version',
    'GET /eth/v1/node/syncing',
    'GET /eth/v1/node/health',
    'GET /eth/v1/node/identity',
    'GET /eth/v1/node/peers',
    'GET /eth/v1/node/peer_count',
    'GET /eth/v1/beacon/genesis',
    'GET /eth/v1/beacon/headers',
    'GET /eth/v1/beacon/headers/{block_id}',
    'GET /eth/v2/beacon/blocks/{block_id}',
    'GET /eth/v1/beacon/blocks/{block_id}/root',
    'GET /eth/v1/beacon/blocks/{block_id}/attestations',
    'GET /eth/v1/beacon/blob_sidecars/{block_id}',
    'GET /eth/v1/beacon/deposit_snapshot',
    'GET /eth/v1/beacon/states/{state_id}/root',
    'GET /eth/v1/beacon/states/{state_id}/fork',
    'GET /eth/v1/beacon/states/{state_id}/finality_checkpoints',
    'GET /eth/v1/beacon/states/{state_id}/validators',
    'POST /eth/v1/beacon/states/{state_id}/validators',
    'GET /eth/v1/beacon/states/{state_id}/validators/{validator_id}',
    'GET /eth/v1/beacon/states/{state_id}/validator_balances',
    'POST /eth/v1/beacon/states/{state_id}/validator_balances',
    'GET /eth/v1/beacon/states/{state_id}/committees',
    'GET /eth/v1/beacon/states/{state_id}/sync_committees',
    'GET /eth/v1/beacon/states/{state_id}/randao',
    'GET /eth/v1/config/spec',
    'GET /eth/v1/config/fork_schedule',
    'GET /eth/v1/config/deposit_contract',
    'GET /eth/v1/validator/duties/attester/{epoch}',
    'POST /eth/v1/validator/duties/attester/{epoch}',
    'GET /eth/v1/validator/duties/proposer/{epoch}',
    'POST /eth/v1/validator/duties/sync/{epoch}',
    'GET /eth/v1/validator/attestation_data',
    'GET /eth/v1/validator/aggregate_attestation',
    'GET /eth/v1/validator/sync_committee_contribution',
    'GET /eth/v3/validator/blocks/{slot}',
    ...[
      'attestations',
      'attester_slashings',
      'proposer_slashings',
      'voluntary_exits',
      'sync_committees',
      'bls_to_execution_changes',
    ].flatMap((p) => [`GET /eth/v1/beacon/pool/${p}`, `POST /eth/v1/beacon/pool/${p}`]),
    'GET /eth/v2/debug/beacon/states/{state_id}',
    'GET /eth/v2/debug/beacon/heads',
    'GET /eth/v1/debug/fork_choice',
    'GET /eth/v1/events',
    'GET /eth/v2/beacon/blocks/{block_id}/attestations',
    'GET /eth/v2/beacon/pool/attestations',
    'POST /eth/v2/beacon/pool/attestations',
    'GET /eth/v2/beacon/pool/attester_slashings',
    'POST /eth/v2/beacon/pool/attester_slashings',
    'GET /eth/v2/validator/aggregate_attestation',
    'GET /eth/v1/beacon/blobs/{block_id}',
  ];
  t.same([...rows].sort(), [...expected].sort());
  t.ok(Object.isFrozen(BEACON_ROUTES));
  t.ok(BEACON_ROUTES.every((r) => Object.isFrozen(r)));
});

t.test('every route matches its example under its own method', async (t) => {
  for (const { method, template } of BEACON_ROUTES) {
    const path = fill(template);
    t.same(matchBeaconPath(method, path), { ok: true, template, events: template === '/eth/v1/events' }, `${method} ${path}`);
  }
});

t.test('every route refuses the other methods with 405 and the right Allow', async (t) => {
  for (const template of TEMPLATES) {
    const allowed = methodsOf(template);
    const allow = allowed.join(', ');
    const path = fill(template);
    for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'get']) {
      if (allowed.includes(method)) continue;
      const r = matchBeaconPath(method, path);
      t.match(r, { ok: false, status: 405, allow }, `${method} ${path}`);
      if (!r.ok) t.match(r.message, template, 'the message names the route');
    }
  }
  t.same(
    matchBeaconPath('GET', '/eth/v1/validator/duties/attester/1'),
    { ok: true, template: '/eth/v1/validator/duties/attester/{epoch}', events: false },
    'attester duties by GET, as the spec lists them',
  );
  t.match(matchBeaconPath('PUT', '/eth/v1/validator/duties/attester/1'), { ok: false, status: 405, allow: 'GET, POST' });
  t.match(matchBeaconPath('GET', '/eth/v1/validator/duties/sync/1'), { ok: false, status: 405, allow: 'POST' });
  t.match(matchBeaconPath('POST', '/eth/v1/node/version'), { ok: false, status: 405, allow: 'GET' });
  t.match(matchBeaconPath('PUT', '/eth/v1/beacon/pool/attestations'), { ok: false, status: 405, allow: 'GET, POST' });
});

const GOOD_UINT = ['0', '1', '9', '10', '123456789', '18446744073709551615'];
const BAD_UINT = ['00', '01', '-1', 'abc', '1e3', '0x10', '18446744073709551616', '99999999999999999999', '100000000000000000000'];
const PARAMS: Record<string, { good: string[]; bad: string[]; expected: string }> = {
  state_id: {
    good: ['head', 'genesis', 'finalized', 'justified', ...GOOD_UINT, ROOT, ROOT.toUpperCase().replace('0X', '0x'), `0x${'00'.repeat(32)}`],
    bad: [
      'foo',
      'Head',
      'current',
      ...BAD_UINT,
      `0x${'ab'.repeat(31)}`,
      `0x${'ab'.repeat(33)}`,
      `0X${'ab'.repeat(32)}`,
      `0x${'g'.repeat(64)}`,
      `${'ab'.repeat(32)}`,
      PUBKEY,
      '0x',
    ],
    expected: 'head, genesis, finalized, justified, a slot number or a 0x-prefixed 32-byte root',
  },
  block_id: {
    good: ['head', 'genesis', 'finalized', ...GOOD_UINT, ROOT],
    bad: ['justified', 'foo', ...BAD_UINT, `0x${'ab'.repeat(31)}`, PUBKEY],
    expected: 'head, genesis, finalized, a slot number or a 0x-prefixed 32-byte root',
  },
  validator_id: {
    good: [...GOOD_UINT, PUBKEY, PUBKEY.toUpperCase().replace('0X', '0x')],
    bad: ['head', ...BAD_UINT, ROOT, `0x${'93'.repeat(47)}`, `0x${'93'.repeat(49)}`, `0x${'z'.repeat(96)}`],
    expected: 'a validator index or a 0x-prefixed 48-byte public key',
  },
  epoch: { good: GOOD_UINT, bad: ['head', ...BAD_UINT, ROOT], expected: 'an epoch number' },
  slot: { good: GOOD_UINT, bad: ['head', ...BAD_UINT, ROOT], expected: 'a slot number' },
};

for (const [name, { good, bad, expected }] of Object.entries(PARAMS)) {
  t.test(`${name}: accepted and refused forms, on every route that takes it`, async (t) => {
    const routes = BEACON_ROUTES.filter((r) => r.template.includes(`{${name}}`));
    t.ok(routes.length > 0, `some route takes ${name}`);
    for (const { method, template } of routes) {
      for (const value of good) {
        t.match(matchBeaconPath(method, fill(template, { [name]: value })), { ok: true, template }, `${template} ${name}=${value}`);
      }
      for (const value of bad) {
        const r: BeaconMatch = matchBeaconPath(method, fill(template, { [name]: value }));
        t.match(r, { ok: false, status: 400 }, `${template} ${name}=${value}`);
        if (!r.ok) {
          t.ok(r.message.startsWith(`Invalid ${name} '${value}': expected ${expected}`), r.message);
          t.equal(r.allow, undefined);
        }
      }
    }
  });
}

t.test('the message of a bad state_id is the documented one', async (t) => {
  t.same(matchBeaconPath('GET', '/eth/v1/beacon/states/foo/root'), {
    ok: false,
    status: 400,
    message: "Invalid state_id 'foo': expected head, genesis, finalized, justified, a slot number or a 0x-prefixed 32-byte root",
  });
});

t.test('a path that could reach anything else is refused with 400 before any lookup', async (t) => {
  const attempts = [
    '/eth/v1/../v1/node/version',
    '/eth/v1/node/../../admin',
    '/eth/v1/node/./version',
    '/eth/v1/beacon/states/../root',
    '/eth/v1/beacon/states/./root',
    '/../eth/v1/node/version',
    '/eth/v1/node/version/..',
    '/eth/v1/node/version/.',
    '/eth/v1/node/%2e%2e/version',
    '/eth/v1/node/%2E%2E',
    '/eth/v1/beacon/states/%68ead/root',
    '/eth/v1/node/version%00',
    '/eth/v1/node/version%2f..',
    '/eth/v1/events%3Ftopics=head',
    '%2Feth/v1/node/version',
    '/eth//v1/node/version',
    '//eth/v1/node/version',
    '/eth/v1/node/version/',
    '/eth/v1/node//version',
    '/',
    '/eth/v1/node/ver sion',
    '/eth/v1/node/version;x',
    '/eth/v1/node/version?x=1',
    '/eth/v1/node/version#x',
    '/eth/v1/node\\..\\version',
    '/eth/v1/node/version\u0000',
    '/eth/v1/node/versión',
    '/eth/v1/beacon/states/head:1/root',
    '/eth/v1/beacon/states/+1/root',
    '/eth/v1/node/version\r\nX: y',
    '/eth/v1/node/~version',
    '/eth/v1/node/{version}',
  ];
  for (const path of attempts) {
    for (const method of ['GET', 'POST', 'DELETE']) {
      const r = matchBeaconPath(method, path);
      t.match(r, { ok: false, status: 400 }, `${method} ${JSON.stringify(path)}`);
      if (!r.ok) {
        t.ok(r.message.startsWith('Invalid Beacon API path'), JSON.stringify(r.message));
        t.notOk(/[^\x20-\x7e]/.test(r.message), 'the echoed path is escaped to printable ASCII');
      }
    }
  }
  t.match(matchBeaconPath('GET', '/eth/v1/node/version\r\nX: y'), {
    message: "Invalid Beacon API path '/eth/v1/node/version\\u000d\\u000aX: y': characters outside A-Z, a-z, 0-9, _, - and .",
  });
  t.match(matchBeaconPath('GET', '/eth/v1/node/%2e%2e'), { message: /percent-encoding/ });
  t.match(matchBeaconPath('GET', '/eth//v1'), { message: /empty path segment/ });
  t.match(matchBeaconPath('GET', '/eth/v1/..'), { message: /'\.\.' path segment/ });
  t.match(matchBeaconPath('GET', '/eth/v1/node/ver sion'), { message: /characters outside/ });
});

t.test('a dot inside a segment is no dot segment', async (t) => {
  t.match(matchBeaconPath('GET', '/eth/v1/node/version.json'), { ok: false, status: 404 });
  t.match(matchBeaconPath('GET', '/eth/v1/node/...'), { ok: false, status: 404 });
});

t.test('paths outside the allowlist are 404 and named in the message', async (t) => {
  const unlisted = [
    '/eth/v1/beacon/blocks/head',
    '/eth/v2/beacon/blocks',
    '/eth/v1/beacon/states/head',
    '/eth/v1/beacon/states/head/state',
    '/eth/v1/debug/beacon/states/head',
    '/eth/v1/debug/beacon/heads',
    '/eth/v1/node',
    '/eth/v1/node/version/extra',
    '/eth/v1/node/peers/16Uiu2HAm',
    '/eth/v1/admin/peers',
    '/eth/v1/lighthouse/health',
    '/lighthouse/health',
    '/eth',
    '/ETH/v1/node/version',
    '/eth/V1/node/version',
    '/eth/v1/Node/version',
    '/eth/v4/validator/blocks/1',
    '/eth/v1/beacon/light_client/finality_update',
    '/eth/v1/validator/blocks/1',
    '/eth/v1/beacon/states/head/validators/1/x',
    '/eth/v1/events/head',
    'eth/v1/node/version',
    '',
    '/constructor',
    '/__proto__',
    '/eth/v1/beacon/pool',
    '/eth/v1/beacon/states/foo/nope',
  ];
  for (const path of unlisted) {
    const r = matchBeaconPath('GET', path);
    t.match(r, { ok: false, status: 404 }, JSON.stringify(path));
    if (!r.ok) {
      t.ok(r.message.startsWith('No Beacon API path'), r.message);
      t.ok(r.message.includes(`'${path}'`), 'names the path');
      t.equal(r.allow, undefined);
    }
  }
});

t.test('checks run in order: malformed, unknown, method, parameter', async (t) => {
  t.match(matchBeaconPath('PUT', '/eth/v1/nope/%41'), { status: 400 }, 'malformed before unknown');
  t.match(matchBeaconPath('PUT', '/eth/v1/nope'), { status: 404 }, 'unknown before method');
  t.match(matchBeaconPath('PUT', '/eth/v1/beacon/states/foo/root'), { status: 405, allow: 'GET' }, 'method before parameter');
  t.match(
    matchBeaconPath('GET', '/eth/v1/beacon/states/foo/validators/bar'),
    { status: 400, message: /^Invalid state_id 'foo'/ },
    'the first bad parameter is named',
  );
  t.match(matchBeaconPath('GET', '/eth/v1/beacon/states/head/validators/bar'), { status: 400, message: /^Invalid validator_id 'bar'/ });
});

t.test('routes without parameters match exactly and only the events stream is flagged', async (t) => {
  t.same(matchBeaconPath('GET', '/eth/v2/debug/beacon/heads'), { ok: true, template: '/eth/v2/debug/beacon/heads', events: false });
  t.same(matchBeaconPath('GET', '/eth/v1/beacon/headers'), { ok: true, template: '/eth/v1/beacon/headers', events: false });
  t.same(matchBeaconPath('GET', '/eth/v1/events'), { ok: true, template: '/eth/v1/events', events: true });
  const flagged = BEACON_ROUTES.filter((r) => {
    const m = matchBeaconPath(r.method, fill(r.template));
    return m.ok && m.events;
  });
  t.same(flagged, [{ method: 'GET', template: '/eth/v1/events' }]);
});

t.test('an echoed path is cut short', async (t) => {
  const long = `/eth/v1/${'a'.repeat(10_000)}`;
  const r = matchBeaconPath('GET', long);
  t.match(r, { ok: false, status: 404 });
  if (!r.ok) t.ok(r.message.length < 300, `message of ${r.message.length} chars`);
  const bad = matchBeaconPath('GET', `/eth/v1/beacon/states/${'9'.repeat(5_000)}/root`);
  t.match(bad, { ok: false, status: 400, message: /^Invalid state_id/ });
  if (!bad.ok) t.ok(bad.message.length < 400, `message of ${bad.message.length} chars`);
});
