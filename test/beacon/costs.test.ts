import t from 'tap';
import { beaconCost, DEFAULT_BEACON_RU, EVENT_DELIVERY_RU, unknownBeaconCostPaths } from '../../src/beacon/costs.js';
import { BEACON_ROUTES } from '../../src/beacon/paths.js';

const TEMPLATES = new Set(BEACON_ROUTES.map((r) => r.template));

t.test('the built-in table', async (t) => {
  t.same(
    { ...DEFAULT_BEACON_RU },
    {
      '/eth/v1/events': 10,
      '/eth/v1/node/health': 15,
      '/eth/v1/node/syncing': 15,
      '/eth/v1/node/version': 15,
      '/eth/v1/beacon/genesis': 20,
      '/eth/v1/beacon/states/{state_id}/finality_checkpoints': 20,
      '/eth/v1/beacon/blocks/{block_id}/root': 20,
      '/eth/v1/beacon/headers': 25,
      '/eth/v1/beacon/headers/{block_id}': 25,
      '/eth/v1/config/spec': 75,
      '/eth/v1/validator/duties/proposer/{epoch}': 80,
      '/eth/v2/beacon/blocks/{block_id}': 500,
      '/eth/v1/beacon/blob_sidecars/{block_id}': 500,
      '/eth/v1/beacon/blobs/{block_id}': 500,
      '/eth/v1/beacon/states/{state_id}/validators': 500,
      '/eth/v1/beacon/states/{state_id}/validators/{validator_id}': 500,
      '/eth/v1/beacon/states/{state_id}/validator_balances': 500,
      '/eth/v1/beacon/states/{state_id}/committees': 2000,
      '/eth/v2/debug/beacon/states/{state_id}': 2000,
    },
  );
  t.equal(EVENT_DELIVERY_RU, 1);
  for (const template of Object.keys(DEFAULT_BEACON_RU)) t.ok(TEMPLATES.has(template), `${template} is a route`);
  t.ok(Object.isFrozen(DEFAULT_BEACON_RU));
  t.equal(DEFAULT_BEACON_RU.toString, undefined, 'no prototype members');
});

t.test('built-in, override, fallback', async (t) => {
  const none = {};
  t.equal(beaconCost('/eth/v1/beacon/states/{state_id}/committees', none, 20), 2000);
  t.equal(beaconCost('/eth/v1/node/version', none, 20), 15);
  t.equal(beaconCost('/eth/v1/node/peers', none, 20), 20, 'unpriced route takes the fallback');
  t.equal(beaconCost('/eth/v1/node/peers', none, 33), 33);
  t.equal(beaconCost('/eth/v2/beacon/blocks/{block_id}/attestations', none, 20), 20);
  t.equal(beaconCost('/eth/v1/beacon/genesis', none, 33), 20, 'a priced route keeps its price when the fallback moves');

  const overrides = { '/eth/v1/node/version': 1, '/eth/v1/node/peers': 7, '/eth/v2/debug/beacon/states/{state_id}': 0 };
  t.equal(beaconCost('/eth/v1/node/version', overrides, 20), 1, 'override beats built-in');
  t.equal(beaconCost('/eth/v1/node/peers', overrides, 20), 7, 'override beats fallback');
  t.equal(beaconCost('/eth/v2/debug/beacon/states/{state_id}', overrides, 20), 0, 'a zero override is honoured');
  t.equal(beaconCost('/eth/v1/config/spec', overrides, 20), 75, 'other routes keep their built-in');

  for (const key of ['toString', '__proto__', 'constructor', 'hasOwnProperty']) {
    t.equal(beaconCost(key, none, 20), 20, `${key} is no price`);
  }
  const inherited = Object.create({ '/eth/v1/node/peers': 99 }) as Record<string, number>;
  t.equal(beaconCost('/eth/v1/node/peers', inherited, 20), 20, 'inherited keys are not overrides');
});

t.test('unknown ru.beacon.paths keys', async (t) => {
  t.same(unknownBeaconCostPaths({}), []);
  const all: Record<string, number> = {};
  for (const template of TEMPLATES) all[template] = 1;
  t.same(unknownBeaconCostPaths(all), [], 'every template is a known key');
  t.same(
    unknownBeaconCostPaths({
      '/eth/v1/node/version': 1,
      '/eth/v1/node/version/': 1,
      '/eth/v1/beacon/states/head/root': 1,
      '/eth/v1/beacon/states/{stateId}/root': 1,
      'eth/v1/node/peers': 1,
      '/eth/v1/admin/peers': 1,
      '/eth/v1/beacon/states/{state_id}/root': 1,
    }),
    [
      '/eth/v1/node/version/',
      '/eth/v1/beacon/states/head/root',
      '/eth/v1/beacon/states/{stateId}/root',
      'eth/v1/node/peers',
      '/eth/v1/admin/peers',
    ],
  );
});
