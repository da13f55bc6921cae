/**
 * Allowed origins: the browser's `Origin` header matched against an endpoint's list. An entry is an
 * origin (`https://app.example.com`, `http://localhost:3000`) or a wildcard over the subdomains of a host
 * (`https://*.example.com`); without a scheme (`app.example.com`, `*.example.com`) it stands for both http
 * and https. A wildcard matches every name below the host, at any depth, never the host itself (list
 * `example.com` as well for that). A port is part of the origin: an entry without one matches only the
 * scheme's default port, as browsers leave it out of `Origin`.
 *
 * The `Origin` value `null` (sandboxed frames, `file:` pages, some redirects) is never allowed: any page
 * can make its requests carry it, so allowing it would allow every site.
 */

/** Why an entry is not an origin, or undefined when it is. */
export function originEntryProblem(entry: string): string | undefined {
  return parseEntry(entry).problem;
}

/** An entry in the form it is stored and compared in: lower-case, no default port, no trailing slash. */
export function normaliseOriginEntry(entry: string): string {
  const parsed = parseEntry(entry);
  if (parsed.problem !== undefined) throw new Error(parsed.problem);
  const host = parsed.wildcard ? `*.${parsed.host}` : parsed.host;
  return parsed.scheme === undefined ? host : `${parsed.scheme}//${host}`;
}

interface ParsedEntry {
  problem?: string;
  /** `https:`, `http:`, or undefined for both. */
  scheme?: string;
  /** host[:port], lower-case, without the wildcard's `*.`. */
  host: string;
  wildcard: boolean;
}

function parseEntry(entry: string): ParsedEntry {
  const bad = (why: string): ParsedEntry => ({ problem: `'${entry}' is not an origin (${why})`, host: '', wildcard: false });
  const schemeEnd = entry.indexOf('://');
  let rest = schemeEnd >= 0 ? entry.slice(schemeEnd + 3) : entry;
  const scheme = schemeEnd >= 0 ? `${entry.slice(0, schemeEnd).toLowerCase()}:` : undefined;
  if (scheme !== undefined && scheme !== 'http:' && scheme !== 'https:') return bad('the scheme must be http or https');
  if (rest.endsWith('/')) rest = rest.slice(0, -1);
  const wildcard = rest.startsWith('*.');
  if (wildcard) rest = rest.slice(2);
  if (rest.includes('*')) return bad("'*' may only open the host, as in *.example.com");
  if (/[/?#@\s\\]/.test(rest) || rest === '') return bad('an origin is scheme://host[:port], without a path, query or user');
  let url: URL;
  try {
    // The URL parser lower-cases, turns a unicode name into its punycode and drops a default port, as browsers do.
    url = new URL(`${scheme ?? 'https:'}//${rest}`);
  } catch {
    return bad('not a valid host');
  }
  if (wildcard && !url.hostname.includes('.')) return bad('a wildcard needs a domain of two labels or more, as in *.example.com');
  // A scheme-less entry stands for http and https alike, whose default ports differ.
  if (scheme === undefined && /:(?:80|443)$/.test(rest))
    return bad('port 80 or 443 without a scheme is ambiguous: write http:// or https://');
  return { scheme, host: url.host, wildcard };
}

/** Whether an `Origin` header value is allowed. */
export type OriginMatcher = (origin: string) => boolean;

// The shape browsers send: lower-case scheme and host, no default port. Anything else goes through the URL parser.
const CANONICAL = /^(https?:)\/\/([a-z0-9.-]+)(:\d{1,5})?$/;

/** The matcher of a list of entries (each valid: see originEntryProblem), made once per endpoint. */
export function compileOrigins(entries: readonly string[]): OriginMatcher {
  // Exact origins as browsers spell them (`https://a.example.com`), in a set; the wildcards as one regular
  // expression (`https://(?:[a-z0-9-]+\.)+example\.com`, one alternative each), tried once per origin.
  const exact = new Set<string>();
  const wildcards: string[] = [];
  for (const entry of entries) {
    const parsed = parseEntry(entry);
    if (parsed.problem !== undefined) continue;
    for (const scheme of parsed.scheme === undefined ? ['https:', 'http:'] : [parsed.scheme]) {
      if (parsed.wildcard) wildcards.push(`${scheme}//(?:[a-z0-9-]+\\.)+${escapeRegExp(parsed.host)}`);
      else exact.add(`${scheme}//${parsed.host}`);
    }
  }
  const wildcard = wildcards.length === 0 ? null : new RegExp(`^(?:${wildcards.join('|')})$`);
  return (origin) => {
    if (exact.has(origin) || wildcard?.test(origin)) return true;
    // Not as a browser spells it (upper case, a default port): read it, then look again.
    const canonical = canonicalOrigin(origin);
    if (canonical === undefined || canonical === origin) return false;
    return exact.has(canonical) || wildcard?.test(canonical) === true;
  };
}

function escapeRegExp(host: string): string {
  return host.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function isDefaultPort(m: RegExpExecArray): boolean {
  return m[3] === (m[1] === 'https:' ? ':443' : ':80');
}

/** The origin as browsers spell it, or undefined when the value is not an http(s) origin (`null` included). */
export function canonicalOrigin(origin: string): string | undefined {
  const m = CANONICAL.exec(origin);
  if (m !== null && !isDefaultPort(m)) return origin;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '' || url.pathname !== '/') return undefined;
  return `${url.protocol}//${url.host}`;
}
