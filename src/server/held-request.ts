import { beaconErrorBody, ERRORS, rpcErrorBody } from '../errors.js';
import { tallyFor } from '../pipeline/answers.js';
import { whenKeyKnown } from '../pipeline/caller.js';
import { type GatewayContext, requestDone } from '../pipeline/context.js';
import { clientLimitAddress } from './peer-address.js';
import { JSON_TYPE, type ResponseMeta, sendWhole } from './respond.js';
import type { HttpRequest, HttpResponse } from './uws.js';

type DataHandler = (chunk: ArrayBuffer, isLast: boolean) => void;

/**
 * A request held while the gateway reads something it must know first (in a fleet: a key this instance
 * has not met, from PostgreSQL). uWS gives a request's head only during its handler, and its body only to a
 * handler registered then: so the head is copied and the body buffered as it arrives (up to `maxBody` + 1
 * bytes: enough for the handlers' own limit check, which then refuses it; reading stops there), and `resume` hands both to a
 * handler as if they had just arrived, in a corked callback (an upgrade included).
 */
export interface HeldRequest {
  /** Runs `handler` on the held request, unless its client has gone. */
  resume(handler: (res: HttpResponse, req: HttpRequest) => void): void;
}

export function holdRequest(res: HttpResponse, req: HttpRequest, maxBody: number, readsBody: boolean, onAbort?: () => void): HeldRequest {
  const headers = new Map<string, string>();
  req.forEach((name, value) => {
    headers.set(name, value);
  });
  const head = { method: req.getMethod(), url: req.getUrl(), query: req.getQuery() ?? '' };
  const copy = {
    getHeader: (name: string) => headers.get(name) ?? '',
    getMethod: () => head.method,
    getCaseSensitiveMethod: () => head.method.toUpperCase(),
    getUrl: () => head.url,
    getQuery: () => head.query,
    forEach: (cb: (name: string, value: string) => void) => {
      for (const [k, v] of headers) cb(k, v);
    },
  } as unknown as HttpRequest;

  let aborted = false;
  let onAborted: (() => void) | null = null;
  res.onAborted(() => {
    aborted = true;
    onAbort?.();
    onAborted?.();
  });
  const chunks: ArrayBuffer[] = [];
  let size = 0;
  let ended = !readsBody;
  let onData: DataHandler | null = null;
  if (readsBody) {
    res.onData((ab, isLast) => {
      // Past the limit the handler refuses the body: what it needs to see is that there was more. Reading stops
      // there (as readBody's does), and the refusal closes the connection.
      if (size <= maxBody) {
        const kept = ab.slice(0, Math.min(ab.byteLength, maxBody + 1 - size));
        size += kept.byteLength;
        if (size > maxBody) res.pause();
        if (onData === null) chunks.push(kept);
        else onData(kept, isLast);
      } else if (isLast && onData !== null) onData(new ArrayBuffer(0), true);
      if (isLast) ended = true;
    });
  }

  const held = new Proxy(res, {
    get(target, prop) {
      if (prop === 'onAborted')
        return (fn: () => void) => {
          onAborted = fn;
          return held;
        };
      if (prop === 'onData')
        return (fn: DataHandler) => {
          onData = fn;
          const buffered = chunks.splice(0);
          if (buffered.length === 0 && ended) fn(new ArrayBuffer(0), true);
          for (let i = 0; i < buffered.length; i++) fn(buffered[i]!, ended && i === buffered.length - 1);
          return held;
        };
      const value = Reflect.get(target, prop) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });

  return {
    resume(handler) {
      if (!aborted) res.cork(() => handler(held, copy));
    },
  };
}

/** Addresses over the unknown-key limit whose key lookups wait in line; past this many, the next is refused. */
const THROTTLED_LINES_MAX = 4096;
/** Per address over the unknown-key limit: the end of its line of key lookups. */
const throttledLines = new Map<string, Promise<void>>();

/** Where a held request goes, for its 503 when the store cannot read its key: its chain, transport and CORS. */
export interface HeldRoute {
  chain: string;
  /** `ws`: an upgrade, refused before it is one (counted as a refusal only, as the upgrade's other refusals). */
  transport: 'http' | 'beacon' | 'ws';
  meta: ResponseMeta;
}

/** The 503 (`store_unavailable`) of a held request, in its transport's error shape, counted on its chain. */
function refuseHeld(ctx: GatewayContext, res: HttpResponse, route: HeldRoute): void {
  const tally = tallyFor(ctx, ctx.chains.get(route.chain)!, route.transport, null);
  if (route.transport === 'ws') tally.refused('store_unavailable');
  else tally.refusedWhole('store_unavailable', 1);
  const body = route.transport === 'beacon' ? beaconErrorBody('store_unavailable') : rpcErrorBody('store_unavailable', 'null');
  sendWhole(res, ERRORS.store_unavailable.http, route.meta, JSON_TYPE, body, undefined, true);
}

/**
 * A request whose API key this instance of a fleet has not met: held while the key is read from PostgreSQL,
 * then `road` runs it with the answer at hand, or it is answered 503 when the store could not (`refuseHeld`). It is
 * in flight meanwhile, so a graceful stop waits for it. An address over the unknown-key limit this minute has
 * its lookups made one at a time, so a flood of random keys from it costs the store one query at a time,
 * while a valid key from behind the same address still works.
 */
export function holdForKey(
  ctx: GatewayContext,
  res: HttpResponse,
  req: HttpRequest,
  key: string,
  readsBody: boolean,
  road: (res: HttpResponse, req: HttpRequest) => void,
  route: HeldRoute,
): void {
  const ip = clientLimitAddress(res, req, ctx.config.server);
  const throttled = ctx.tenancy.unknownKeys.throttled(ip);
  if (throttled && !throttledLines.has(ip) && throttledLines.size >= THROTTLED_LINES_MAX) {
    // Too many addresses guessing at once: this one is answered as an unknown key (429), costing nothing.
    ctx.tenancy.keys.answering(key, null, () => road(res, req));
    return;
  }
  ctx.inFlight++;
  let counted = true;
  const done = (): void => {
    if (counted) {
      counted = false;
      requestDone(ctx);
    }
  };
  const held = holdRequest(res, req, ctx.config.server.max_body_bytes, readsBody, done);
  const lookUp = (turnOver: () => void): void =>
    whenKeyKnown(
      ctx,
      key,
      (run) => {
        turnOver();
        done();
        held.resume((r, q) => run(() => road(r, q)));
      },
      () => {
        turnOver();
        done();
        held.resume((r) => refuseHeld(ctx, r, route));
      },
    );
  if (!throttled) {
    lookUp(() => {});
    return;
  }
  const line: Promise<void> = (throttledLines.get(ip) ?? Promise.resolve()).then(() => new Promise<void>((turnOver) => lookUp(turnOver)));
  throttledLines.set(ip, line);
  void line.then(() => {
    if (throttledLines.get(ip) === line) throttledLines.delete(ip);
  });
}
