/**
 * The devnet's own config (what `npm start` serves): the keyless path keeps every method open, the heavy ones
 * too, where `chaingate serve` denies them by default (test/config/method-policy.test.ts).
 */
import t from 'tap';
import type { AnvilNode } from '../../src/devnet/anvil.js';
import { devnetConfig } from '../../src/devnet/devnet.js';
import { HEAVY_METHODS } from '../../src/jsonrpc/methods.js';

t.test('the devnet serves the heavy methods keyless', async (t) => {
  const anvil = { url: 'http://127.0.0.1:8545', wsUrl: 'ws://127.0.0.1:8545' } as AnvilNode;
  const config = devnetConfig(anvil, 'http://127.0.0.1:5052', 8080, '127.0.0.1', '/tmp/devnet-config-test.db');
  t.ok(HEAVY_METHODS.length > 0, 'there are heavy methods to keep open');
  t.same(config.public.methods.deny, [], 'public.methods.deny is empty on the devnet');
});
