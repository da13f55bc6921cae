import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { connect } from 'node:tls';
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

t.test('a reload reads the certificate files again: new connections get the renewed one, open ones carry on', async (t) => {
  const node = await anvilFor(t);
  const first = testCertificate(t);
  const renewed = testCertificate(t);
  const g = await gatewayFor(t, {
    server: { tls: { cert_file: first.certFile, key_file: first.keyFile } },
    chains: { devnet: evmChain([node.url]) },
  });
  const port = g.gateway.port;
  const fingerprint = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
        resolve(s.getPeerCertificate().fingerprint256);
        s.end();
      });
      s.once('error', reject);
    });
  const pem = (file: string): string => new X509Certificate(readFileSync(file)).fingerprint256;
  t.equal(await fingerprint(), pem(first.certFile), 'the first certificate at start');

  // An open keep-alive connection, made before the renewal.
  const agent = new Agent({ keepAlive: true, maxSockets: 1, ca: [first.cert, renewed.cert] });
  t.teardown(() => agent.destroy());
  const call = (): Promise<{ status: number; socket: object }> =>
    new Promise((resolve, reject) => {
      const req = request(`${g.base}/v1/rpc/public`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, socket: res.socket }));
      });
      req.on('error', reject);
      req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }));
    });
  const before = await call();

  // A renewal writes new files at the same paths, then reloads.
  copyFileSync(renewed.certFile, first.certFile);
  copyFileSync(renewed.keyFile, first.keyFile);
  await g.gateway.reload(g.gateway.context.config);
  t.equal(await fingerprint(), pem(renewed.certFile), 'a new connection gets the renewed certificate');
  const after = await call();
  t.equal(after.status, 200, 'the connection opened before the renewal still answers');
  t.equal(after.socket, before.socket, 'on the same socket');
});
