import t from 'tap';
import { request } from 'node:https';
import { testCertificate } from '../support/cert.js';
import { anvilFor, evmChain, gatewayFor } from '../support/gateway.js';

t.test('with server.tls the gateway serves HTTPS itself', async (t) => {
  const node = await anvilFor(t);
  const { certFile, keyFile, cert } = testCertificate(t);
  const g = await gatewayFor(t, { server: { tls: { cert_file: certFile, key_file: keyFile } }, chains: { devnet: evmChain([node.url]) } });
  t.match(g.base, /^https:/);
  const body = JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'net_version', params: [] });
  const answer = await new Promise<{ status: number; text: string; authorized: boolean }>((resolve, reject) => {
    const req = request(`${g.base}/v1/rpc/public`, { method: 'POST', ca: cert, headers: { 'content-type': 'application/json' } }, (res) => {
      const authorized = (res.socket as import('node:tls').TLSSocket).authorized;
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text, authorized }));
    });
    req.on('error', reject);
    req.end(body);
  });
  t.equal(answer.status, 200);
  t.ok(answer.authorized, 'the certificate verified against the test CA');
  t.same(JSON.parse(answer.text), { jsonrpc: '2.0', id: 5, result: '31337' });
});
