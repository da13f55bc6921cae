/** What an open connection does when its endpoint changed, by what its key now grants (regrant.ts). */
import t from 'tap';
import { compileFences } from '../../src/fences/fences.js';
import { NO_FENCES } from '../../src/fences/settings.js';
import type { Caller } from '../../src/pipeline/admission.js';
import type { GatewayContext } from '../../src/pipeline/context.js';
import { regrant } from '../../src/pipeline/regrant.js';
import type { EndpointAuth } from '../../src/tenancy/key-cache.js';

const KEY = 'k'.repeat(32);
const NOW = 1_000_000;
const held: EndpointAuth = {
  endpointId: 'ep_a',
  ownerId: 1,
  network: 'devnet',
  plan: 'free',
  suspended: false,
  fences: null,
  keyExpiresAtMs: null,
};

function contextAnswering(answer: EndpointAuth | null | undefined): GatewayContext {
  return { now: () => NOW, tenancy: { keys: { cached: (key: string) => (key === KEY ? answer : null) } } } as unknown as GatewayContext;
}

const callerWith = (auth: EndpointAuth | null, key: string | null = KEY) => ({ auth, key }) as Caller;
const fences = (origins: string[]) => compileFences({ ...NO_FENCES, allowed_origins: origins });

t.test('kept while the key grants the same', async (t) => {
  t.same(regrant(contextAnswering({ ...held }), callerWith(held)), { kind: 'keep' });
  t.same(regrant(contextAnswering({ ...held, plan: 'growth' }), callerWith(held)), { kind: 'keep' }, 'a plan change keeps it');
  const f = fences(['https://a.example']);
  t.same(
    regrant(contextAnswering({ ...held, fences: fences(['https://a.example']) }), callerWith({ ...held, fences: f })),
    { kind: 'keep' },
    'the same settings compiled again',
  );
  t.same(regrant(contextAnswering(null), callerWith(null, null)), { kind: 'keep' }, 'the public path has no key to look up');
});

t.test('closed when the key stopped working or its restrictions changed', async (t) => {
  t.same(regrant(contextAnswering(null), callerWith(held)), { kind: 'close', why: 'revoked' }, 'deleted');
  t.same(regrant(contextAnswering(undefined), callerWith(held)), { kind: 'close', why: 'revoked' }, 'not known here any more (a fleet)');
  t.same(regrant(contextAnswering({ ...held, suspended: true }), callerWith(held)), { kind: 'close', why: 'revoked' }, 'owner suspended');
  t.same(
    regrant(contextAnswering({ ...held, endpointId: 'ep_b' }), callerWith(held)),
    { kind: 'close', why: 'revoked' },
    'another endpoint',
  );
  t.same(
    regrant(contextAnswering({ ...held, fences: fences(['https://a.example']) }), callerWith(held)),
    { kind: 'close', why: 'restricted' },
    'restrictions set',
  );
  t.same(
    regrant(
      contextAnswering({ ...held, fences: fences(['https://b.example']) }),
      callerWith({ ...held, fences: fences(['https://a.example']) }),
    ),
    { kind: 'close', why: 'restricted' },
    'restrictions changed',
  );
  t.same(
    regrant(contextAnswering(held), callerWith({ ...held, fences: fences(['https://a.example']) })),
    { kind: 'close', why: 'restricted' },
    'restrictions cleared',
  );
});

t.test('a rotated-out key: closed at its end, or now when it is past', async (t) => {
  t.same(regrant(contextAnswering({ ...held, keyExpiresAtMs: NOW + 5000 }), callerWith(held)), { kind: 'close_at', atMs: NOW + 5000 });
  t.same(
    regrant(contextAnswering({ ...held, keyExpiresAtMs: NOW }), callerWith(held)),
    { kind: 'close', why: 'expired' },
    'the last millisecond is the end',
  );
});
