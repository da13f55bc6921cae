import type { ChainConfig } from '../config/schema.js';

/**
 * Where a request goes, decided from its method, path and Host alone (no I/O), so the rules are one
 * pure function that tests can walk. The chain is named by the Host's first label, else by a leading
 * path segment, else it is the default chain.
 */
export type Route =
  /**
   * `named`: the Host or path named the chain (a keyed request for another chain is refused). `key` is null
   * on the public path and '' when the path has none.
   */
  | { kind: 'rpc'; chain: ChainConfig; named: boolean; key: string | null; rest: string }
  | { kind: 'management'; path: string }
  /** `methods`: the verbs the path serves, for Access-Control-Allow-Methods. */
  | { kind: 'preflight'; methods: string }
  | { kind: 'error'; code: 'not_found' | 'method_not_allowed'; message: string; allow?: string };

/** A request's way to a chain: what the JSON-RPC, Beacon and WebSocket roads are opened with. */
export type RpcTarget = Extract<Route, { kind: 'rpc' }>;

export interface RouteTable {
  chains: Readonly<Record<string, ChainConfig>>;
  defaultChain: string;
}

/** The chain named by the first label of a Host header (`mainnet.rpc.example.com:443` → mainnet). */
function chainFromHost(host: string, t: RouteTable): ChainConfig | undefined {
  if (host === '') return undefined;
  const end = host.indexOf('.');
  const label = (end < 0 ? host.replace(/:\d+$/, '') : host.slice(0, end)).toLowerCase();
  return Object.hasOwn(t.chains, label) ? t.chains[label] : undefined;
}

/** The management REST lives under /api/dashboard, on the main listener or its own. */
export function isManagementPath(path: string): boolean {
  return path === '/api/dashboard' || path.startsWith('/api/dashboard/');
}

/** `method` is the request's lower-case method, or 'upgrade' for a WebSocket handshake. */
export function resolveRoute(method: string, url: string, host: string, t: RouteTable): Route {
  const byHost = chainFromHost(host, t);
  let path = url;
  let byPath: ChainConfig | undefined;
  const second = path.indexOf('/', 1);
  const first = second < 0 ? path.slice(1) : path.slice(1, second);
  if (first !== 'v1' && Object.hasOwn(t.chains, first)) {
    byPath = t.chains[first];
    path = second < 0 ? '/' : path.slice(second);
  }
  if (byHost && byPath && byHost !== byPath) {
    return { kind: 'error', code: 'not_found', message: `The Host names chain '${byHost.slug}' but the path names '${byPath.slug}'` };
  }
  if (isManagementPath(path)) return { kind: 'management', path };
  const chain = byHost ?? byPath ?? t.chains[t.defaultChain];
  if ((path !== '/v1/rpc' && !path.startsWith('/v1/rpc/')) || chain === undefined) {
    return { kind: 'error', code: 'not_found', message: `No route for ${url}` };
  }
  const keyEnd = path.indexOf('/', 8);
  let segment = keyEnd < 0 ? path.slice(8) : path.slice(8, keyEnd);
  let rest = keyEnd < 0 ? '' : path.slice(keyEnd);
  // A Beacon path with the key in a header (`/v1/rpc/eth/v1/...`): every Beacon path starts with /eth/, and no
  // key is `eth` (keys are 32 characters), so the segment is the path's, and the key is the empty one.
  if (segment === 'eth' && rest !== '') {
    rest = `/eth${rest}`;
    segment = '';
  }
  // No key at all (`/v1/rpc`, `/v1/rpc/`, `/v1/rpc//eth/...`) is the empty key: refused as an unknown key (401).
  const key = segment === 'public' ? null : segment;
  const named = byHost !== undefined || byPath !== undefined;
  if (method === 'options') return { kind: 'preflight', methods: isBeaconRest(rest) ? 'GET, POST, OPTIONS' : 'POST, OPTIONS' };
  // A key on an unnamed path serves its endpoint's network: its kind is known only once the key is looked up.
  if (key === null || named) {
    const refusal = kindRefusal(chain, method, rest, url);
    if (refusal !== null) return refusal;
  }
  return { kind: 'rpc', chain, named, key, rest };
}

/** A Beacon REST path under /v1/rpc/<key>, as opposed to the JSON-RPC path itself. */
export function isBeaconRest(rest: string): boolean {
  return rest !== '' && rest !== '/';
}

/** What a chain of this kind refuses: a Beacon path on an evm chain, a WebSocket to a beacon chain, another verb than POST for JSON-RPC. */
export function kindRefusal(chain: ChainConfig, method: string, rest: string, url: string): Extract<Route, { kind: 'error' }> | null {
  if (chain.kind === 'evm' && isBeaconRest(rest)) {
    return {
      kind: 'error',
      code: 'not_found',
      message: `No route for ${url}: chain '${chain.slug}' is an evm chain and serves JSON-RPC at /v1/rpc/<key>, not the Beacon API`,
    };
  }
  if (method === 'upgrade' && chain.kind === 'beacon') {
    return {
      kind: 'error',
      code: 'not_found',
      message: `Chain '${chain.slug}' is a beacon chain: it has no WebSocket transport (events are served at /eth/v1/events)`,
    };
  }
  if (chain.kind === 'evm' && method !== 'post' && method !== 'upgrade') {
    return { kind: 'error', code: 'method_not_allowed', message: 'JSON-RPC is served by POST', allow: 'POST, OPTIONS' };
  }
  return null;
}

/**
 * Routes a RouteMemo keeps at most; past it, it starts again. A keyed URL is one route per key, so the memo
 * holds as many keys as the key cache does by default (50,000) and more: at 1,024 it started again every
 * thousand calls once they spread over 20,000 keys, and nearly every call was resolved anew. About 200
 * bytes a route, 4 MB per worker for 20,000 keys.
 */
const MEMO_MAX = 65_536;
/** Host and URL longer than this together are resolved each time (a path with an API key is ~70). */
const MEMO_KEY_MAX = 256;

/**
 * resolveRoute's answers to POSTs (every JSON-RPC call), kept by Host and URL: a client's calls repeat both,
 * and the answer is a pure function of them and the table. Made anew when a reload gives the table other
 * chains or another default chain. The routes kept are shared between requests, which only read them.
 */
export class RouteMemo {
  private chains: RouteTable['chains'] | null = null;
  private defaultChain = '';
  private byHost = new Map<string, Map<string, Route>>();
  private size = 0;

  resolve(method: string, url: string, host: string, t: RouteTable): Route {
    if (method !== 'post') return resolveRoute(method, url, host, t);
    if (t.chains !== this.chains || t.defaultChain !== this.defaultChain || this.size >= MEMO_MAX) {
      this.chains = t.chains;
      this.defaultChain = t.defaultChain;
      this.byHost = new Map();
      this.size = 0;
    }
    let byUrl = this.byHost.get(host);
    const kept = byUrl?.get(url);
    if (kept !== undefined) return kept;
    const route = resolveRoute(method, url, host, t);
    // Refusals and long names are not kept: a flood of unknown paths or hosts must neither fill the memo
    // with messages that repeat the URL nor push out the routes real calls use.
    if (route.kind === 'error' || url.length + host.length > MEMO_KEY_MAX) return route;
    if (byUrl === undefined) this.byHost.set(host, (byUrl = new Map()));
    byUrl.set(url, route);
    this.size++;
    return route;
  }
}
