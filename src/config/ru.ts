/**
 * The `ru` section: what calls, notifications and Beacon paths cost in request units. Built-in method
 * costs (jsonrpc/methods.ts) and Beacon costs (beacon/costs.ts) apply unless overridden here.
 */
import type { Static } from './typebox.js';
import type { Errors } from './checks.js';
import { int, mapOf, Problem, section } from './keys.js';
import { checkMethodCosts, methodCosts } from './method-policy.js';
import { unknownBeaconCostPaths } from '../beacon/costs.js';

export const RuSchema = section(
  {
    default: int(0, 1_000_000, 15, 'RU of an allowed method without a cost of its own (built-in or in methods).'),
    methods: methodCosts('Method → RU over the built-in costs; only methods the gateway serves (case-sensitive).'),
    notification_per_250_bytes: int(0, 1_000_000, 5, 'RU of a delivered subscription notification, per started 250 bytes.'),
    beacon: section(
      {
        default: int(0, 1_000_000, 20, 'RU of a Beacon path without a cost of its own.'),
        per_event: int(0, 1_000_000, 1, 'RU of one Beacon event delivered to a client.'),
        paths: mapOf(
          int(0, 1_000_000, 0, 'RU of one call of the path.'),
          'RU by Beacon route template, e.g. /eth/v2/beacon/blocks/{block_id}.',
          {
            default: {},
            [Problem]: 'must be a mapping of Beacon route templates to RU',
          },
        ),
      },
      'Beacon paths: default for listed paths without a cost, per_event per delivered event, paths by route template.',
    ),
  },
  'Request units: what each call costs.',
);

export type RuConfig = Static<typeof RuSchema>;

/** Every priced method and Beacon path must be one the gateway serves: a cost for another is never charged. */
export function checkRu(ru: RuConfig, errors: Errors): void {
  for (const p of unknownBeaconCostPaths(ru.beacon.paths))
    errors.push(
      `ru.beacon.paths.${p}: not a Beacon route the gateway serves (write it as its template, e.g. /eth/v2/beacon/blocks/{block_id})`,
    );
  checkMethodCosts(ru.methods, 'ru.methods', errors);
}
