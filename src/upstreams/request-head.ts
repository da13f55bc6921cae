import type { UpstreamRequest } from './http-client.js';
import { encodeTextPost } from './text-post.js';
import type { UpstreamTarget } from './upstream-url.js';

/** Serializes requests for one upstream: head and body in one buffer, ready for a single socket write. */
export interface RequestEncoder {
  /** Throws a TypeError when a per-request path or header could break the request's framing. */
  encode(req: UpstreamRequest): Buffer;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Latin-1 without controls: the head is written as latin1, so anything wider would be mangled.
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const REQUEST_PATH = /^\/[\x21-\x7e]*$/;
// The client frames bodies and manages connection reuse itself.
const RESERVED = new Set(['content-length', 'transfer-encoding', 'connection', 'upgrade', 'expect']);

/**
 * Builds the encoder, validating the configured headers (TypeError naming the header). The request
 * line for the URL's own target, Host and the configured headers are rendered once here; a request
 * adds only its own path, headers and Content-Length.
 */
/**
 * Per-request header arrays already checked and rendered. Callers pass the same frozen array with every
 * call (the JSON content type of each forwarded call), so its lines are checked and built once.
 */
const renderedHeaders = new WeakMap<ReadonlyArray<readonly [string, string]>, string>();

function headerLines(extra: ReadonlyArray<readonly [string, string]>): string {
  const known = renderedHeaders.get(extra);
  if (known !== undefined) return known;
  let lines = '';
  for (let i = 0; i < extra.length; i++) {
    const [name, value] = extra[i]!;
    if (!TOKEN.test(name) || !FIELD_VALUE.test(value)) {
      throw new TypeError(`request header ${JSON.stringify(name)} has an invalid name or value`);
    }
    lines += name + ': ' + value + '\r\n';
  }
  // Only a frozen array can be trusted to say the same thing next time.
  if (Object.isFrozen(extra) && extra.every((h) => Object.isFrozen(h))) renderedHeaders.set(extra, lines);
  return lines;
}

export function createRequestEncoder(target: UpstreamTarget, headers: Record<string, string> = {}): RequestEncoder {
  let hostHeader = target.hostHeader;
  let authorization = target.basicAuth;
  let configured = '';
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!TOKEN.test(name)) throw new TypeError(`headers["${name}"] is not a valid header name`);
    if (typeof value !== 'string' || !FIELD_VALUE.test(value)) {
      throw new TypeError(`headers["${name}"] must be a string without control characters`);
    }
    if (RESERVED.has(lower)) throw new TypeError(`headers["${name}"] is managed by the upstream client`);
    if (lower === 'host') hostHeader = value;
    else if (lower === 'authorization') authorization = undefined;
    if (lower !== 'host') configured += `${name}: ${value}\r\n`;
  }
  if (authorization !== undefined) configured += `Authorization: ${authorization}\r\n`;

  const sharedLines = ` HTTP/1.1\r\nHost: ${hostHeader}\r\n${configured}`;
  const defaultTarget = target.basePath + (target.baseQuery === '' ? '' : '?' + target.baseQuery);
  const postHead = 'POST ' + defaultTarget + sharedLines;
  const getHead = 'GET ' + defaultTarget + sharedLines;
  const joinBase = target.basePath.endsWith('/') ? target.basePath.slice(0, -1) : target.basePath;
  const baseQuery = target.baseQuery;

  function requestTarget(path: string): string {
    if (!REQUEST_PATH.test(path)) throw new TypeError('request path must start with / and hold only visible ASCII');
    const q = path.indexOf('?');
    if (q === -1) return baseQuery === '' ? joinBase + path : joinBase + path + '?' + baseQuery;
    const ownQuery = path.slice(q + 1);
    const query = baseQuery === '' ? ownQuery : ownQuery === '' ? baseQuery : baseQuery + '&' + ownQuery;
    return joinBase + path.slice(0, q) + (query === '' ? '' : '?' + query);
  }

  // The head of a POST to the URL's own target, up to Content-Length's value, as bytes, per per-request
  // header array: a forwarded call copies it instead of building and encoding a string (see headerLines).
  const postPrefixes = new WeakMap<ReadonlyArray<readonly [string, string]>, Buffer>();
  const postPrefix = (extra: ReadonlyArray<readonly [string, string]> | undefined): Buffer | undefined => {
    if (extra === undefined) return undefined;
    let prefix = postPrefixes.get(extra);
    // Made once its header lines are known good and kept (renderedHeaders): a first request takes the long way.
    if (prefix === undefined && renderedHeaders.has(extra)) {
      prefix = Buffer.from(postHead + headerLines(extra) + 'Content-Length: ', 'latin1');
      postPrefixes.set(extra, prefix);
    }
    return prefix;
  };

  return {
    encode(req) {
      const body = req.body;
      const prefix = req.path === undefined && req.method === 'POST' && typeof body === 'string' ? postPrefix(req.headers) : undefined;
      if (prefix !== undefined) return encodeTextPost(prefix, body as string);
      let head =
        req.path === undefined ? (req.method === 'POST' ? postHead : getHead) : req.method + ' ' + requestTarget(req.path) + sharedLines;
      const extra = req.headers;
      if (extra !== undefined) head += headerLines(extra);
      const bodyLength = body === undefined ? 0 : typeof body === 'string' ? Buffer.byteLength(body) : body.length;
      // POST always states its length, so the upstream never waits for a body that is not coming.
      head += bodyLength > 0 || req.method === 'POST' ? 'Content-Length: ' + bodyLength + '\r\n\r\n' : '\r\n';
      const out = Buffer.allocUnsafe(head.length + bodyLength);
      out.write(head, 0, 'latin1');
      if (bodyLength > 0) {
        if (typeof body === 'string') out.write(body, head.length, 'utf8');
        else (body as Buffer).copy(out, head.length);
      }
      return out;
    },
  };
}
