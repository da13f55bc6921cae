import { BEACON_ROUTES, EVENTS_TEMPLATE } from './paths.js';

const table: Record<string, number> = Object.create(null) as Record<string, number>;
Object.assign(table, {
  // Opening the stream; each delivered event costs EVENT_DELIVERY_RU on top.
  [EVENTS_TEMPLATE]: 10,
  '/eth/v1/node/health': 15,
  '/eth/v1/node/syncing': 15,
  '/eth/v1/node/version': 15,
  // Priced explicitly at 20 by the provider table, so they stay 20 when an operator moves ru.beacon.default.
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
  // The GET and POST forms share a template, and so a price.
  '/eth/v1/beacon/states/{state_id}/validators': 500,
  '/eth/v1/beacon/states/{state_id}/validators/{validator_id}': 500,
  '/eth/v1/beacon/states/{state_id}/validator_balances': 500,
  '/eth/v1/beacon/states/{state_id}/committees': 2000,
  '/eth/v2/debug/beacon/states/{state_id}': 2000,
});

/** Route template → built-in RU of one request, for the templates the provider table prices (null prototype). */
export const DEFAULT_BEACON_RU: Readonly<Record<string, number>> = Object.freeze(table);

/** RU of each event written to an open events stream. */
export const EVENT_DELIVERY_RU = 1;

const TEMPLATES: ReadonlySet<string> = new Set(BEACON_ROUTES.map((route) => route.template));

/** RU of one request to `template`: configured override, else built-in, else `fallback` (config ru.beacon.default, 20). */
export function beaconCost(template: string, overrides: Readonly<Record<string, number>>, fallback: number): number {
  if (Object.hasOwn(overrides, template)) return overrides[template] as number;
  return DEFAULT_BEACON_RU[template] ?? fallback;
}

/** Checks an operator's `ru.beacon.paths` keys: each must be a template of BEACON_ROUTES; returns the unknown ones. */
export function unknownBeaconCostPaths(paths: Readonly<Record<string, number>>): string[] {
  return Object.keys(paths).filter((path) => !TEMPLATES.has(path));
}
