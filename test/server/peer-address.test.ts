/**
 * clientIp over real uWS sockets: IPv4, IPv6 and IPv4-mapped peers, each with its own text although the
 * texts of IPv4 peers are kept, and X-Forwarded-For with and without trust_proxy.
 */
import t, { type Test } from 'tap';
import { request } from 'node:http';
import { clientIp } from '../../src/server/peer-address.js';
import { closeApp, uws } from '../../src/server/uws.js';

/**
 * A uWS listener on `host` port 0 whose every answer is clientIp of its request; the header
 * x-trust: 1 turns trust_proxy on for that request.
 */
async function ipEcho(t: Test, host: string): Promise<number> {
  const app = uws().App();
  app.any('/*', (res, req) => {
    const ip = clientIp(res, req, req.getHeader('x-trust') === '1');
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

t.test("clientIp: the socket's peer, as uWS writes it, each address its own text", async (t) => {
  const v4 = await ipEcho(t, '127.0.0.1');
  const dual = await ipEcho(t, '::');
  const mapped = (last: string): string => `0000:0000:0000:0000:0000:ffff:7f00:000${last}`;
  // In this order, so a text kept for one peer would be handed to the next.
  const cases: Array<[string, number, string, string]> = [
    ['127.0.0.1', v4, '127.0.0.1', '127.0.0.1'],
    ['127.0.0.1', v4, '127.0.0.2', '127.0.0.2'],
    ['127.0.0.1', dual, '127.0.0.1', mapped('1')],
    ['127.0.0.1', dual, '127.0.0.2', mapped('2')],
    ['127.0.0.1', v4, '127.0.0.1', '127.0.0.1'],
    ['::1', dual, '::1', '0000:0000:0000:0000:0000:0000:0000:0001'],
    ['127.0.0.1', dual, '127.0.0.1', mapped('1')],
  ];
  for (const [to, port, from, ip] of cases) {
    t.equal(await seen(to, port, from), ip, `from ${from} to ${port === v4 ? 'an IPv4' : 'a dual-stack'} listener`);
  }
});

t.test('clientIp: X-Forwarded-For only with trust_proxy, its last hop', async (t) => {
  const port = await ipEcho(t, '127.0.0.1');
  const cases: Array<[string, Record<string, string>, string]> = [
    ['no trust: the header is ignored', { 'x-forwarded-for': '203.0.113.9' }, '127.0.0.1'],
    ['trust, no header: the peer', { 'x-trust': '1' }, '127.0.0.1'],
    ['trust: the one hop', { 'x-trust': '1', 'x-forwarded-for': '203.0.113.9' }, '203.0.113.9'],
    ['trust: the last of several, trimmed', { 'x-trust': '1', 'x-forwarded-for': '198.51.100.1, 10.0.0.1 ,  203.0.113.9 ' }, '203.0.113.9'],
    ['trust: no spaces', { 'x-trust': '1', 'x-forwarded-for': '198.51.100.1,2001:db8::1' }, '2001:db8::1'],
    ['trust: an empty last hop is the peer', { 'x-trust': '1', 'x-forwarded-for': '203.0.113.9, ' }, '127.0.0.1'],
    ['trust: an empty header is the peer', { 'x-trust': '1', 'x-forwarded-for': '' }, '127.0.0.1'],
  ];
  for (const [why, headers, ip] of cases) t.equal(await seen('127.0.0.1', port, '127.0.0.1', headers), ip, why);
});
