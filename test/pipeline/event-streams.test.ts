/**
 * Beacon event streams (pipeline/event-streams.ts) that end before they start: the status and Beacon error each
 * end is refused with, and the owner's recent failures keeping that same error row (never one read off the
 * status: a 503 at shutdown is not upstream_budget, a 401 or 402 has its row).
 */
import t from 'tap';
import type { ChainRuntime } from '../../src/chain/runtime.js';
import { ERRORS } from '../../src/errors.js';
import type { SseClient } from '../../src/fanout/sse-hub.js';
import { tallyFor } from '../../src/pipeline/answers.js';
import { createEventStreams, type EventStreamOut } from '../../src/pipeline/event-streams.js';
import { keyedCaller, pipelineContext } from '../support/pipeline-context.js';

const CHAIN = { devnet: { chain_id: 31337, upstreams: [{ url: 'http://127.0.0.1:1' }] } };

t.test("a stream ended before it started is refused and kept under its end's error row", async (t) => {
  const s = pipelineContext(t, { chains: CHAIN });
  const real = s.chain('devnet');
  // The hub holds each client without starting it, so the test ends it as the hub or the gateway would.
  let held: SseClient | null = null;
  const events = {
    add(client: SseClient) {
      held = client;
      return { drained() {}, remove() {} };
    },
  };
  const chain = { config: real.config, metrics: real.metrics, events } as unknown as ChainRuntime;
  const noEvents = { config: real.config, metrics: real.metrics, events: null } as unknown as ChainRuntime;
  const streams = createEventStreams(s.ctx);
  const { caller, ownerId, apiKey } = keyedCaller(s, 'devnet');
  caller.tally = tallyFor(s.ctx, real, 'sse', apiKey);
  const endpointId = caller.auth!.endpointId;
  const refused: number[] = [];
  const out: EventStreamOut = {
    gone: false,
    open: () => t.fail('no stream opens'),
    write: () => true,
    end: () => t.fail('a stream never started is refused, not ended'),
    refuse: (status) => refused.push(status),
  };
  const open = (on: ChainRuntime): SseClient => {
    const admitted = streams.admit(caller, 'topics=head');
    if (admitted.kind !== 'admitted') throw new Error(`refused: ${admitted.body}`);
    held = null;
    streams.start(on, caller, admitted, out);
    return held!;
  };
  // The hub's own ends, the gateway's (an owner out of RU), and a key revoked (management).
  open(chain).close('shutdown');
  (open(chain).close as (reason: string) => void)('balance');
  open(chain);
  streams.closeEndpoint(endpointId);
  open(noEvents);
  t.same(refused, [503, 402, 401, 502], "each refused with its row's status");
  if (!s.ctx.tenancy.ledger.flush()) throw new Error('the ledger flush failed');
  const kept = await s.ctx.tenancy.accounts.failures(ownerId, endpointId, 10);
  t.same(
    kept.map((f) => [f.http_status, f.error, f.message]).reverse(),
    [
      [503, 'shutting_down', ERRORS.shutting_down.message],
      [402, 'insufficient_balance', ERRORS.insufficient_balance.message],
      [401, 'unauthorized', ERRORS.unauthorized.message],
      [502, 'upstream_error', ERRORS.upstream_error.message],
    ],
    'each failure under the row its refusal was answered with',
  );
});
