/**
 * Path templates (`/eth/v1/beacon/states/{state_id}/root`) to handlers by method. A path no template
 * matches is 404; a matched path without a handler for the method is 405 with `Allow`.
 */
import { fail, type Handler, type Reply } from './beacon-reply.js';

export interface NodeRoute {
  readonly path: string;
  readonly GET?: Handler;
  readonly POST?: Handler;
}

export type Match =
  | { readonly ok: true; readonly handler: Handler; readonly params: Record<string, string> }
  | { readonly ok: false; readonly reply: Reply };

interface Compiled {
  readonly segments: readonly string[];
  readonly literals: number;
  readonly route: NodeRoute;
}

export interface Router {
  match(method: string, pathname: string): Match;
}

export function createRouter(routes: readonly NodeRoute[]): Router {
  const compiled: Compiled[] = routes
    .map((route) => {
      const segments = route.path.split('/').slice(1);
      return { segments, literals: segments.filter((s) => !s.startsWith('{')).length, route };
    })
    // A literal segment wins over a parameter in the same place (`/debug/beacon/heads` is not a state id).
    .sort((a, b) => b.literals - a.literals);

  return {
    match(method, pathname) {
      const parts = pathname.split('/').slice(1);
      for (const c of compiled) {
        if (c.segments.length !== parts.length) continue;
        const params: Record<string, string> = {};
        let malformed = false;
        const fits = c.segments.every((seg, i) => {
          const part = parts[i] ?? '';
          if (!seg.startsWith('{')) return seg === part;
          if (part === '') return false;
          try {
            params[seg.slice(1, -1)] = decodeURIComponent(part);
          } catch {
            malformed = true;
          }
          return true;
        });
        if (!fits) continue;
        if (malformed) return { ok: false, reply: fail(400, `malformed path parameter in ${pathname}`) };
        const handler = method === 'GET' || method === 'HEAD' ? c.route.GET : method === 'POST' ? c.route.POST : undefined;
        if (handler) return { ok: true, handler, params };
        const allow = (['GET', 'POST'] as const).filter((m) => c.route[m]).join(', ');
        return {
          ok: false,
          reply: { kind: 'error', status: 405, message: `method ${method} not allowed on ${pathname}`, headers: { allow } },
        };
      }
      return { ok: false, reply: fail(404, `no such path: ${pathname}`) };
    },
  };
}
