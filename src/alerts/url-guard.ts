/**
 * Where a webhook may be sent (issue 36 §3): no SSRF into the operator's network. A URL must be https:// and
 * every address its host resolves to public unicast, unless the operator allows private ones
 * (`webhooks.allow_private`, which admits http:// too). The host is checked when the webhook is registered,
 * and again at each delivery by the connection's own lookup (`guardedLookup`), so a name that later
 * resolves to a private address (DNS rebinding) is refused where the socket is opened, not before.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** The longest URL accepted. */
export const MAX_WEBHOOK_URL = 2048;

/** Why an address may not be reached, or null when it may: anything but public unicast is refused. */
export function addressProblem(address: string, allowPrivate: boolean): string | null {
  if (allowPrivate) return null;
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`;
  // An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged as the IPv4 address it is.
  const range = ipaddr.process(address).range();
  return range === 'unicast' ? null : `${address} is a ${range} address (webhooks reach public addresses only)`;
}

/** The URL's problem before any lookup (scheme, shape, credentials), or its parts. */
export function parseWebhookUrl(text: string, allowPrivate: boolean): { ok: true; url: URL } | { ok: false; problem: string } {
  if (text.length > MAX_WEBHOOK_URL) return { ok: false, problem: `is longer than ${MAX_WEBHOOK_URL} characters` };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, problem: 'is not a URL' };
  }
  const schemes = allowPrivate ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) {
    return { ok: false, problem: allowPrivate ? 'must be an http:// or https:// URL' : 'must be an https:// URL' };
  }
  if (url.username !== '' || url.password !== '') return { ok: false, problem: 'must not carry a user or password' };
  return { ok: true, url };
}

/** The hostname as a lookup takes it: an IPv6 literal without its brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** Every address `host` resolves to, each checked; the first problem, or null when all may be reached. */
export function checkHost(host: string, allowPrivate: boolean): Promise<string | null> {
  if (isIP(host) !== 0) return Promise.resolve(addressProblem(host, allowPrivate));
  return new Promise((resolve) =>
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => {
      if (err !== null) return resolve(`its host ${host} does not resolve (${err.code ?? err.message})`);
      if (addresses.length === 0) return resolve(`its host ${host} has no address`);
      for (const a of addresses) {
        const problem = addressProblem(a.address, allowPrivate);
        if (problem !== null) return resolve(`its host ${host} resolves to ${problem}`);
      }
      resolve(null);
    }),
  );
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http(s).request that resolves every address and refuses the connection when any one may
 * not be reached: the socket then connects only to addresses just checked.
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => {
      if (err !== null) return callback(err, []);
      const refused = addresses.map((a) => addressProblem(a.address, allowPrivate)).find((p) => p !== null);
      if (refused !== undefined || addresses.length === 0) {
        const e: NodeJS.ErrnoException = new Error(refused ?? `${hostname} has no address`);
        e.code = 'EADDRREFUSED_BY_POLICY';
        return callback(e, []);
      }
      if (options.all === true) return callback(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}
