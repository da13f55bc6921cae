/**
 * A key written with nothing after it (`port:`, YAML's null) reads as left out, for every key alike; an
 * entry of a mapping of names written empty (`devnet:`) is reported rather than dropped; an empty list
 * item is refused.
 */
import t from 'tap';
import { loadConfigText } from '../../src/config/load.js';
import { readPlans } from '../../src/config/schema.js';
import { readStorageSection } from '../../src/config/storage.js';

const chain = `
chains:
  devnet:
    chain_id: 1
    upstreams: [{ url: "http://127.0.0.1:8545" }]
`;

function errorsOf(text: string): string[] {
  const r = loadConfigText(text);
  return r.ok ? [] : r.errors;
}

t.test('a key written empty is at its default, or absent when it has none', async (t) => {
  const r = loadConfigText(
    `${chain}server:\n  port:\n  public_base_url:\nplans:\n  gold: { rps: 5, ru_per_second: }\nmetrics:\n  token:\n`,
  );
  if (!t.ok(r.ok, r.ok ? '' : r.errors.join('\n')) || !r.ok) return;
  t.equal(r.config.server.port, 8080);
  t.equal(r.config.server.public_base_url, 'http://127.0.0.1:8080/{chain}');
  t.equal(r.config.plans.gold!.ru_per_second, undefined, 'no RU rate limit, as when the key is left out');
  t.equal(r.config.metrics?.token, undefined);
});

t.test('a required key written empty is missing', async (t) => {
  t.same(errorsOf(chain.replace('chain_id: 1', 'chain_id:')), ['chains.devnet.chain_id: required for an evm chain']);
  t.same(errorsOf(`${chain}plans:\n  gold: { rps: }\n`), ['plans.gold.rps: required']);
});

t.test('a chain or plan written empty is reported, not dropped', async (t) => {
  t.same(errorsOf(`${chain}  beacon:\n`).sort(), [
    'chains.beacon.chain_id: required for an evm chain',
    'chains.beacon.upstreams: must list at least one upstream',
    'server.default_chain: required when more than one chain is configured (devnet, beacon)',
  ]);
  t.same(errorsOf(`${chain}plans:\n  gold:\n`), ['plans.gold.rps: required']);
  t.same(
    errorsOf(`${chain}plans:\n  gold: 5\n`),
    ['plans.gold: must be a mapping', 'plans.gold.rps: required'],
    'an entry that is no mapping reads as an empty one',
  );
});

t.test('a list item written empty is refused, not skipped', async (t) => {
  t.same(errorsOf(`${chain.replace('upstreams: [{ url: "http://127.0.0.1:8545" }]', 'upstreams:\n      -\n')}`), [
    'chains.devnet.upstreams[0]: must be a mapping',
  ]);
  t.same(errorsOf(`${chain}server:\n  cors_origins: ["*", ]\n`), [], 'a trailing comma is no item');
  t.same(errorsOf(`${chain}server:\n  cors_origins:\n    -\n`), ['server.cors_origins: must be a list of non-empty strings']);
});

t.test('the sections the operator commands read alone: written empty, they are their defaults', async (t) => {
  const errors: string[] = [];
  t.same(Object.keys(readPlans(null, errors)), ['free', 'growth', 'premium'], '`plans:` is the default plans');
  t.same(readStorageSection(null, errors), { path: './data/chaingate.db', reserve_bytes: 4_194_304, url: undefined });
  t.same(errors, []);
  const bad: string[] = [];
  t.same(readPlans(5, bad), {});
  t.same(bad, ['plans: must be a mapping of at least one plan name to its limits']);
});
