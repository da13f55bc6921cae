import type { Type } from '@chainsafe/ssz';

/**
 * What a devnet beacon route answers, before it becomes bytes: JSON with optional version, an empty
 * body, SSZ bytes, an event stream, or a Beacon API error `{code, message}`. Routes return these;
 * only beacon-node.ts writes to the socket.
 */
export type Reply =
  | { readonly kind: 'json'; readonly body: unknown; readonly version?: string; readonly headers?: Readonly<Record<string, string>> }
  | { readonly kind: 'empty'; readonly status: number }
  | { readonly kind: 'ssz'; readonly bytes: Uint8Array; readonly version?: string; readonly headers?: Readonly<Record<string, string>> }
  | { readonly kind: 'events'; readonly topics: readonly string[] }
  | { readonly kind: 'error'; readonly status: number; readonly message: string; readonly headers?: Readonly<Record<string, string>> };

/** A lookup's outcome: the value, or the reply that explains why there is none. */
export type Found<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reply: Reply };

export const fail = (status: number, message: string): Reply => ({ kind: 'error', status, message });
export const found = <T>(value: T): Found<T> => ({ ok: true, value });
export const missing = <T>(status: number, message: string): Found<T> => ({ ok: false, reply: fail(status, message) });

/** A 200 JSON answer; `version` also becomes the Eth-Consensus-Version header. */
export const json = (body: unknown, version?: string, headers?: Record<string, string>): Reply => ({
  kind: 'json',
  body,
  ...(version === undefined ? {} : { version }),
  ...(headers ? { headers } : {}),
});

/**
 * `data` as `type` encodes it, for the paths where the Beacon API offers SSZ: its bytes when the
 * client prefers them, else JSON `{version?, ...meta, data}`. One value, one type: the two forms
 * cannot disagree. `version` becomes the Eth-Consensus-Version header either way.
 */
export function sszOrJson<T>(
  req: BeaconRequest,
  type: Type<T>,
  data: T,
  opts: { meta?: Record<string, unknown>; version?: string; headers?: Record<string, string> } = {},
): Reply {
  const { meta = {}, version, headers } = opts;
  if (req.wantsSsz) return { kind: 'ssz', bytes: type.serialize(data), ...(version ? { version } : {}), ...(headers ? { headers } : {}) };
  return json({ ...(version ? { version } : {}), ...meta, data: type.toJson(data) }, version, headers);
}

/** One request as the routes see it: path parameters, the query, and the JSON body (undefined when none). */
export interface BeaconRequest {
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  readonly body: unknown;
  /** The client asked for SSZ (Accept prefers application/octet-stream). */
  readonly wantsSsz: boolean;
}

export type Handler = (req: BeaconRequest) => Reply | Promise<Reply>;

/** A required decimal uint64 that fits a JS number safely; `name` is the parameter named in the 400. */
export function parseUint(text: string | null | undefined, name: string): Found<number> {
  if (text === null || text === undefined || text === '') return missing(400, `${name} is required`);
  if (!/^\d{1,15}$/.test(text)) return missing(400, `invalid ${name}: ${text}`);
  return found(Number(text));
}

/** A 0x hex value of exactly `bytes` bytes, lowercased, or undefined. */
export function parseHex(text: string, bytes: number): string | undefined {
  return new RegExp(`^0x[0-9a-fA-F]{${bytes * 2}}$`).test(text) ? text.toLowerCase() : undefined;
}

/** A query parameter that may be repeated and comma-separated (`id=1,2&id=3`), as the API allows. */
export function listParam(query: URLSearchParams, name: string): string[] {
  return query
    .getAll(name)
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');
}
