import { isIP } from 'node:net';

/** Where and how to reach one upstream, derived once from its configured URL. */
export interface UpstreamTarget {
  /** true for https: */
  readonly secure: boolean;
  /** Host to connect to: a name or an IP literal without brackets. */
  readonly host: string;
  readonly port: number;
  /** TLS SNI name; undefined for IP literals, which SNI cannot carry. */
  readonly servername: string | undefined;
  /** "scheme://host:port": safe to log, never holds userinfo, path or query. */
  readonly label: string;
  /** Value of the Host header: the port is left out when it is the scheme's default. */
  readonly hostHeader: string;
  /** The URL's path as written, at least '/': the request target when a request names no path of its own. */
  readonly basePath: string;
  /** The URL's query without '?', '' when absent. */
  readonly baseQuery: string;
  /** `Basic …` credentials from the URL's userinfo, undefined when it has none. */
  readonly basicAuth: string | undefined;
}

/**
 * Parses an upstream URL. Throws a TypeError naming `url` when it is unusable; the message never
 * repeats the URL, which may carry provider keys.
 */
export function parseUpstreamUrl(url: string): UpstreamTarget {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError('url must be an absolute http:// or https:// URL');
  }
  const secure = parsed.protocol === 'https:';
  if (!secure && parsed.protocol !== 'http:') throw new TypeError('url must use the http: or https: scheme');
  if (parsed.hostname === '') throw new TypeError('url must name a host');
  if (parsed.hash !== '') throw new TypeError('url must not have a #fragment');

  const defaultPort = secure ? 443 : 80;
  const port = parsed.port === '' ? defaultPort : Number(parsed.port);
  // WHATWG URL keeps IPv6 literals bracketed in `hostname`; sockets want them bare.
  const bracketed = parsed.hostname.startsWith('[');
  const host = bracketed ? parsed.hostname.slice(1, -1) : parsed.hostname;
  const scheme = secure ? 'https' : 'http';

  let basicAuth: string | undefined;
  if (parsed.username !== '' || parsed.password !== '') {
    let user: string;
    let pass: string;
    try {
      user = decodeURIComponent(parsed.username);
      pass = decodeURIComponent(parsed.password);
    } catch {
      throw new TypeError('url userinfo must be valid percent-encoding');
    }
    basicAuth = 'Basic ' + Buffer.from(`${user}:${pass}`, 'utf8').toString('base64');
  }

  return {
    secure,
    host,
    port,
    servername: isIP(host) === 0 ? host : undefined,
    label: `${scheme}://${parsed.hostname}:${port}`,
    hostHeader: port === defaultPort ? parsed.hostname : `${parsed.hostname}:${port}`,
    basePath: parsed.pathname,
    baseQuery: parsed.search.slice(1),
    basicAuth,
  };
}
