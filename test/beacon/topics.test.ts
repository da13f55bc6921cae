import t from 'tap';
import { BEACON_TOPICS, parseTopics } from '../../src/beacon/topics.js';

const ALL = [
  'head',
  'block',
  'block_gossip',
  'attestation',
  'single_attestation',
  'voluntary_exit',
  'bls_to_execution_change',
  'proposer_slashing',
  'attester_slashing',
  'finalized_checkpoint',
  'chain_reorg',
  'contribution_and_proof',
  'light_client_finality_update',
  'light_client_optimistic_update',
  'payload_attributes',
  'blob_sidecar',
  'data_column_sidecar',
];

t.test('the known topics', async (t) => {
  t.same([...BEACON_TOPICS].sort(), [...ALL].sort());
  for (const topic of ALL) t.same(parseTopics(`topics=${topic}`), { ok: true, topics: [topic] }, topic);
  t.same(parseTopics(`topics=${ALL.join(',')}`), { ok: true, topics: ALL }, 'all at once, in order');
});

t.test('comma, repeated and mixed forms, first-seen order, no duplicates', async (t) => {
  const cases: Array<[string, string[]]> = [
    ['topics=head,block', ['head', 'block']],
    ['topics=block,head', ['block', 'head']],
    ['topics=head&topics=block', ['head', 'block']],
    ['topics=head,block&topics=finalized_checkpoint', ['head', 'block', 'finalized_checkpoint']],
    ['topics=head&topics=block,chain_reorg&topics=head', ['head', 'block', 'chain_reorg']],
    ['topics=head,head,head', ['head']],
    ['topics=block&topics=head&topics=block', ['block', 'head']],
    ['topics=head%2Cblock', ['head', 'block']],
    ['topics=head%2cblock%2Cchain_reorg', ['head', 'block', 'chain_reorg']],
    ['%74opics=head', ['head']],
    ['topics=head,', ['head']],
    ['topics=&topics=head', ['head']],
    ['foo=bar&topics=head&x', ['head']],
    ['topics=head&topic=nonsense&Topics=nonsense', ['head']],
  ];
  for (const [query, topics] of cases) t.same(parseTopics(query), { ok: true, topics }, query);
});

t.test('missing or empty topics', async (t) => {
  for (const query of ['', 'topics', 'topics=', 'topics=,', 'topics=&topics=', 'foo=head', 'Topics=head', 'topic=head', '&&']) {
    const r = parseTopics(query);
    t.match(r, { ok: false, message: /^topics is required/ }, JSON.stringify(query));
    if (!r.ok) t.ok(r.message.includes('finalized_checkpoint'), 'lists the known topics');
  }
});

t.test('unknown topics are named, with the known ones listed', async (t) => {
  const cases: Array<[string, string]> = [
    ['topics=weather_forecast', 'weather_forecast'],
    ['topics=head,weather_forecast', 'weather_forecast'],
    ['topics=head&topics=HEAD', 'HEAD'],
    ['topics=%20head', ' head'],
    ['topics=head+', 'head '],
    ['topics=head%2C%20block', ' block'],
    ['topics=__proto__', '__proto__'],
    ['topics=head;block', 'head;block'],
  ];
  for (const [query, name] of cases) {
    const r = parseTopics(query);
    t.match(r, { ok: false }, query);
    if (r.ok) continue;
    t.ok(r.message.startsWith(`Invalid topic '${name}'`), r.message);
    for (const known of ALL) t.ok(r.message.includes(known), `lists ${known}`);
  }
  const long = parseTopics(`topics=${'x'.repeat(5_000)}`);
  t.match(long, { ok: false });
  if (!long.ok) t.ok(long.message.length < 600, `message of ${long.message.length} chars`);
});

t.test('broken percent-encoding is refused, not thrown', async (t) => {
  t.match(parseTopics('topics=head%2'), { ok: false, message: /percent-encoding/ });
  t.match(parseTopics('topics=%E0%A4%A'), { ok: false, message: /percent-encoding/ });
  t.same(parseTopics('other=%zz&topics=head'), { ok: true, topics: ['head'] }, 'another parameter’s bad encoding is ignored');
});
