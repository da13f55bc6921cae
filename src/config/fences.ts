/** The `fences` section: what the operator decides for every endpoint's restrictions (src/fences/). */
import { bool, section } from './keys.js';

export const FencesSchema = section(
  {
    contracts_cover_balance: bool(
      false,
      "Whether an endpoint's allowed_contracts fences eth_getBalance too (its address); false: a balance is not a contract call. Restart to change.",
    ),
  },
  "Endpoints' restrictions, as their owners set them (docs/api.md): the operator's choices for all of them.",
);
