import { KEY_IN_PATH } from '../../src/pipeline/request-fences.js';
import t from 'tap';
import { type Exchange, reply, replySoon } from '../../src/server/exchange.js';
import type { GatewayContext } from '../../src/pipeline/context.js';
import type { HttpResponse } from '../../src/server/uws.js';

/** A response that records what is written to it, in the order uWS would send it. */
function recordingResponse(name: string, log: string[]): HttpResponse {
  const res = {
    cork(cb: () => void) {
      cb();
      return res;
    },
    writeStatus(status: string) {
      log.push(`${name} status ${status}`);
      return res;
    },
    writeHeader() {
      return res;
    },
    end(body: string | Buffer) {
      log.push(`${name} end ${String(body)}`);
      return res;
    },
  };
  return res as unknown as HttpResponse;
}

function exchangeFor(ctx: GatewayContext, name: string, log: string[]): Exchange {
  ctx.inFlight++;
  return {
    ctx,
    res: recordingResponse(name, log),
    req: null as never,
    meta: { allowOrigin: undefined },
    chain: null as never,
    target: null as never,
    keyFacts: KEY_IN_PATH,
    aborted: false,
    finished: false,
    calls: [],
    clientIp: () => '127.0.0.1',
  };
}

const contextFor = (): GatewayContext => ({ inFlight: 0, stopping: false, onIdle: null }) as unknown as GatewayContext;
const checkPhase = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

t.test('answers held with replySoon go out together at the end of the turn, in order, after reply()', async (t) => {
  const ctx = contextFor();
  const log: string[] = [];
  const a = exchangeFor(ctx, 'a', log);
  const b = exchangeFor(ctx, 'b', log);
  const c = exchangeFor(ctx, 'c', log);
  replySoon(a, 200, '{"id":1}');
  replySoon(b, 502, Buffer.from('{"id":2}'));
  reply(c, 200, '{"id":3}');
  t.same(log, ['c end {"id":3}'], 'an immediate reply is written at once; the held ones are not yet');
  t.equal(ctx.inFlight, 2, 'held answers still count as in flight');
  t.notOk(a.finished);
  await checkPhase();
  t.same(
    log,
    ['c end {"id":3}', 'a end {"id":1}', 'b status 502 Bad Gateway', 'b end {"id":2}'],
    'held answers in the order they were given',
  );
  t.equal(ctx.inFlight, 0, 'every request is finished once its answer is written');
  t.ok(a.finished && b.finished);
});

t.test('a client that leaves before the end of the turn gets nothing, and its request still ends once', async (t) => {
  const ctx = contextFor();
  const log: string[] = [];
  let idle = 0;
  ctx.onIdle = () => idle++;
  const gone = exchangeFor(ctx, 'gone', log);
  const kept = exchangeFor(ctx, 'kept', log);
  replySoon(gone, 200, '{"id":1}');
  replySoon(kept, 200, '{"id":2}');
  gone.aborted = true;
  await checkPhase();
  t.same(log, ['kept end {"id":2}'], 'only the client still there is answered');
  t.equal(ctx.inFlight, 0);
  t.equal(idle, 1, 'the stop is told once, when the last answer is written');
  replySoon(exchangeFor(ctx, 'later', log), 200, '{"id":3}');
  await checkPhase();
  t.same(log.at(-1), 'later end {"id":3}', 'the next turn holds and writes its own answers');
});
