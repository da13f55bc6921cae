/** The `transactions` section: transactions sent through the gateway, watched until they land (chain/tx-watch.ts). */
import { bool, int, section } from './keys.js';

export const TransactionsSchema = section(
  {
    watch_blocks: int(1, 100_000, 50, 'Blocks a sent transaction is watched (and sent again while no pool holds it) before it is dropped.'),
    max_watched: int(0, 1_000_000, 10_000, 'Transactions watched per chain at most; past it the oldest goes. 0 watches none.'),
    max_watched_per_key: int(
      1,
      1_000_000,
      100,
      'Transactions one endpoint key (or public client IP) has watched at most; past it its oldest goes.',
    ),
    watch_keyless: bool(false, 'Watch the transactions sent on the public path too.'),
  },
  'Transactions sent with eth_sendRawTransaction, watched until included, replaced or expired.',
);
