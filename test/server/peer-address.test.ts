/**
 * clientLimitAddress over real uWS sockets: IPv4 peers each their own key although their keys are kept,
 * IPv4-mapped peers as their IPv4 address, IPv6 peers by their prefix, and X-Forwarded-For with and
 * without trust_proxy.
 */
import t, { type Test } from 'tap';
import { request } from 'node:http';
import { clientAddress, clientLimitAddress } from '../../src/server/peer-address.js';
import { closeApp, uws } from '../../src/server/uws.js';

/**
 * A uWS listener on `host` port 0 whose every answer is clientLimitAddress of its request; the header
 * x-trust: 1 turns trust_proxy on for that request, x-prefix sets ipv6_prefix (default 64).
 */
async function ipEcho(t: Test, host: string): Promise<number> {
  const app = uws().App();
  app.any('/*', (res, req) => {
    const ip = clientLimitAddress(res, req, {
      trust_proxy: req.getHeader('x-trust') === '1',
      ipv6_prefix: Number(req.getHeader('x-prefix') || '64'),
    });
    res.end(ip);
  });
  const port = await new Promise<number>((resolve, reject) => {
    app.listen(host, 0, (socket) => (socket ? resolve(uws().us_socket_local_port(socket)) : reject(new Error(`cannot listen on ${host}`))));
  });
  t.teardown(() => closeApp(app));
  return port;
}

/** The IP the echo saw for a request from `from` to `to`:`port`. */
function seen(to: string, port: number, from: string, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: to, port, path: '/', localAddress: from, headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve(text));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test("clientLimitAddress: the socket's peer, IPv4 per address, IPv4-mapped as IPv4, IPv6 by its prefix", async (t) => {
  const v4 = await ipEcho(t, '127.0.0.1');
  const dual = await ipEcho(t, '::');
  // In this order, so a key kept for one peer would be handed to the next.
  const cases: Array<[string, number, string, string, Record<string, string>?]> = [
    ['127.0.0.1', v4, '127.0.0.1', '127.0.0.1'],
    ['127.0.0.1', v4, '127.0.0.2', '127.0.0.2'],
    // A dual-stack listener sees an IPv4 peer as ::ffff:127.0.0.1: the same key as on an IPv4 listener.
    ['127.0.0.1', dual, '127.0.0.1', '127.0.0.1'],
    ['127.0.0.1', dual, '127.0.0.2', '127.0.0.2'],
    ['127.0.0.1', v4, '127.0.0.1', '127.0.0.1'],
    ['::1', dual, '::1', '0:0:0:0::/64'],
    ['::1', dual, '::1', '0:0:0:0:0:0:0:1/128', { 'x-prefix': '128' }],
    ['::1', dual, '::1', '0:0:0::/48', { 'x-prefix': '48' }],
    ['127.0.0.1', dual, '127.0.0.1', '127.0.0.1', { 'x-prefix': '128' }],
  ];
  for (const [to, port, from, ip, headers] of cases) {
    const prefix = headers?.['x-prefix'] ?? '64';
    t.equal(await seen(to, port, from, headers), ip, `from ${from} to ${port === v4 ? 'an IPv4' : 'a dual-stack'} listener, /${prefix}`);
  }
});

t.test('clientLimitAddress: X-Forwarded-For only with trust_proxy, its last hop, keyed as a peer is', async (t) => {
  const port = await ipEcho(t, '127.0.0.1');
  const cases: Array<[string, Record<string, string>, string]> = [
    ['no trust: the header is ignored', { 'x-forwarded-for': '203.0.113.9' }, '127.0.0.1'],
    ['trust, no header: the peer', { 'x-trust': '1' }, '127.0.0.1'],
    ['trust: the one hop', { 'x-trust': '1', 'x-forwarded-for': '203.0.113.9' }, '203.0.113.9'],
    ['trust: the last of several, trimmed', { 'x-trust': '1', 'x-forwarded-for': '198.51.100.1, 10.0.0.1 ,  203.0.113.9 ' }, '203.0.113.9'],
    ['trust: no spaces, an IPv6 hop by its /64', { 'x-trust': '1', 'x-forwarded-for': '198.51.100.1,2001:db8::1' }, '2001:db8:0:0::/64'],
    [
      'trust: an IPv6 hop by the prefix set',
      { 'x-trust': '1', 'x-prefix': '48', 'x-forwarded-for': '2001:db8:1:2::28' },
      '2001:db8:1::/48',
    ],
    ['trust: an IPv4-mapped hop as its IPv4 address', { 'x-trust': '1', 'x-forwarded-for': '::ffff:203.0.113.9' }, '203.0.113.9'],
    ['trust: a hop that is no address is its own key', { 'x-trust': '1', 'x-forwarded-for': 'unknown' }, 'unknown'],
    ['trust: an empty last hop is the peer', { 'x-trust': '1', 'x-forwarded-for': '203.0.113.9, ' }, '127.0.0.1'],
    ['trust: an empty header is the peer', { 'x-trust': '1', 'x-forwarded-for': '' }, '127.0.0.1'],
  ];
  for (const [why, headers, ip] of cases) t.equal(await seen('127.0.0.1', port, '127.0.0.1', headers), ip, why);
});

t.test(
  'clientAddress: the whole address for allowed_ips, the last X-Forwarded-For hop with trust_proxy, else the peer bytes',
  async (t) => {
    const app = uws().App();
    app.any('/*', (res, req) => {
      const a = clientAddress(res, req, { trust_proxy: req.getHeader('x-trust') === '1' });
      res.end(typeof a === 'string' ? `text ${a}` : `bytes ${[...a].join('.')}`);
    });
    const port = await new Promise<number>((resolve, reject) => {
      app.listen('::', 0, (socket) => (socket ? resolve(uws().us_socket_local_port(socket)) : reject(new Error('cannot listen'))));
    });
    t.teardown(() => closeApp(app));
    const mapped127 = `bytes ${[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 127, 0, 0, 2].join('.')}`;
    t.equal(await seen('127.0.0.1', port, '127.0.0.2'), mapped127, "the socket's 16 bytes (IPv4-mapped on a dual-stack listener)");
    t.equal(await seen('::1', port, '::1'), `bytes ${[...new Array(15).fill(0), 1].join('.')}`, 'an IPv6 peer, not cut to a prefix');
    t.equal(
      await seen('::1', port, '::1', { 'x-forwarded-for': '203.0.113.9' }),
      `bytes ${[...new Array(15).fill(0), 1].join('.')}`,
      'no trust',
    );
    t.equal(
      await seen('::1', port, '::1', { 'x-trust': '1', 'x-forwarded-for': '198.51.100.1, 2001:db8:1:2::28 ' }),
      'text 2001:db8:1:2::28',
      'the last hop, whole',
    );
    t.equal(
      await seen('::1', port, '::1', { 'x-trust': '1', 'x-forwarded-for': '203.0.113.9, ' }),
      `bytes ${[...new Array(15).fill(0), 1].join('.')}`,
      'an empty hop: the peer',
    );
  },
);
