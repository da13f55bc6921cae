/**
 * docs/tls.md and docs/fleet.md's proxies, as printed: each nginx config passes `nginx -t` and then
 * serves, through TLS, a JSON-RPC call and a WebSocket subscription to gateways on loopback (and the one
 * instance's port 80 server the certbot challenge and the redirect); each Caddyfile passes `caddy
 * validate` as printed and serves the same through Caddy. Only addresses, ports and the certificate's
 * paths are swapped: the certificate is a self-signed one for 127.0.0.1, since a test reaches no CA.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { startBeaconNode } from '../../src/devnet/beacon/beacon-node.js';
import { testCertificate } from '../support/cert.js';
import { anvilFor, gatewayFor, type TestGateway } from '../support/gateway.js';
import { send } from '../support/rpc.js';
import { freePort, IS_ROOT } from '../support/servers.js';
import { waitFor } from '../support/wait-for.js';
import { openSocket } from '../support/ws.js';
import { blockOf, swapped } from './doc-blocks.js';

type Cert = ReturnType<typeof testCertificate>;

/** Debian's nginx is in /usr/sbin, which a user's PATH may not hold. */
const NGINX = existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : 'nginx';

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Starts `cmd` until the test ends, resolved once `port` takes connections. */
async function serve(t: Test, cmd: string, args: string[], port: number, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const child: ChildProcess = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  // SIGTERM: nginx's master then stops its workers (killed outright, they would live on, holding the pipes).
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    child.stdout!.destroy();
    child.stderr!.destroy();
  });
  await waitFor(async () => child.exitCode !== null || (await listening(port)), { what: `${cmd} listening`, ms: 15_000 });
  if (child.exitCode !== null) throw new Error(`${cmd} exited: ${out}`);
}

function httpsPost(port: number, path: string, body: string, cert: Cert): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port, path, method: 'POST', ca: cert.cert, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as unknown }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A JSON-RPC call and a newHeads subscription through the proxy's TLS port. */
async function servesThrough(t: Test, port: number, cert: Cert, mine: () => Promise<unknown>, what: string): Promise<void> {
  const answer = await httpsPost(
    port,
    '/v1/rpc/public',
    JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
    cert,
  );
  t.same(answer, { status: 200, json: { jsonrpc: '2.0', id: 1, result: '0x7a69' } }, `${what}: a JSON-RPC call over HTTPS`);
  const ws = await openSocket(t, `wss://127.0.0.1:${port}/v1/rpc/public`, { ca: cert.cert });
  const sub = (await ws.call({ jsonrpc: '2.0', id: 2, method: 'eth_subscribe', params: ['newHeads'] })) as { result?: string };
  t.type(sub.result, 'string', `${what}: a subscription over WSS`);
  await mine();
  const head = JSON.parse(await ws.next(10_000)) as { method?: string; params?: { subscription?: string } };
  t.equal(head.params?.subscription, sub.result, `${what}: a new head delivered over WSS`);
  ws.ws.close();

  // One event is a few hundred bytes: a proxy that buffers answers would hold it back.
  const events = await httpsStream(t, port, '/devnet-beacon/v1/rpc/public/eth/v1/events?topics=head', cert);
  t.equal(events.status, 200, `${what}: a Beacon event stream over HTTPS`);
  const mining = setInterval(() => void mine().catch(() => {}), 200);
  try {
    await waitFor(() => events.text().includes('event: head'), { what: `${what}: a head event through the proxy`, ms: 10_000 });
  } finally {
    clearInterval(mining);
  }
  t.pass(`${what}: a Beacon head event delivered as it happened`);
}

async function gateways(t: Test, n: number): Promise<{ gws: TestGateway[]; mine: () => Promise<unknown> }> {
  const node = await anvilFor(t);
  // The devnet's beacon node after anvil: a mined block is a Beacon head event, for the event-stream check.
  const beacon = await startBeaconNode({ executionUrl: node.url, pollMs: 50 });
  t.teardown(() => beacon.stop());
  const chains = {
    devnet: { chain_id: 31337, upstreams: [{ url: node.url, ws: node.wsUrl }] },
    'devnet-beacon': { kind: 'beacon', upstreams: [{ url: beacon.url }] },
  };
  const gws = await Promise.all(
    Array.from({ length: n }, () => gatewayFor(t, { server: { default_chain: 'devnet', trust_proxy: true, workers: 1 }, chains })),
  );
  return {
    gws,
    mine: () =>
      send('POST', node.url, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'evm_mine', params: [] }), {
        'content-type': 'application/json',
      }),
  };
}

/** A Beacon event stream opened through the proxy's TLS port: its status, and the text read so far. */
function httpsStream(t: Test, port: number, path: string, cert: Cert): Promise<{ status: number; text: () => string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, ca: cert.cert, headers: { accept: 'text/event-stream' } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('error', () => {});
      resolve({ status: res.statusCode ?? 0, text: () => text });
    });
    req.on('error', reject);
    req.end();
    t.teardown(() => req.destroy());
  });
}

/** nginx on `site` (a file of conf.d, swapped), in a folder of its own: `nginx -t`, then running. */
async function nginxWith(t: Test, site: string, port: number): Promise<{ ok: boolean; out: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'chaingate-nginx-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'site.conf'), site);
  // The main file Debian ships, reduced to what a test needs: its own pid, logs and temp folders.
  const main = `${IS_ROOT ? 'user root;\n' : ''}worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path ${dir}/body;
    proxy_temp_path ${dir}/proxy;
    fastcgi_temp_path ${dir}/fastcgi;
    uwsgi_temp_path ${dir}/uwsgi;
    scgi_temp_path ${dir}/scgi;
    include ${dir}/site.conf;
}
`;
  writeFileSync(join(dir, 'nginx.conf'), main);
  const checked = spawnSync(NGINX, ['-t', '-p', dir, '-c', join(dir, 'nginx.conf')], { encoding: 'utf8' });
  const out = checked.stderr;
  if (checked.status === 0) await serve(t, NGINX, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'], port);
  return { ok: checked.status === 0, out, dir };
}

const certPaths = (cert: Cert): Array<[string, string]> => [
  ['/etc/letsencrypt/live/rpc.example.com/fullchain.pem', cert.certFile],
  ['/etc/letsencrypt/live/rpc.example.com/privkey.pem', cert.keyFile],
];

t.test("tls.md's nginx site for one instance: nginx -t, HTTPS, WSS, the certbot challenge", async (t) => {
  const cert = testCertificate(t);
  const { gws, mine } = await gateways(t, 1);
  const [tls, plain] = [await freePort(), await freePort()];
  const www = mkdtempSync(join(tmpdir(), 'chaingate-www-'));
  t.teardown(() => rmSync(www, { recursive: true, force: true }));
  const site = swapped(blockOf('docs/tls.md', 'nginx', 'upstream chaingate'), [
    ['listen 80;', `listen 127.0.0.1:${plain};`],
    ['listen 443 ssl', `listen 127.0.0.1:${tls} ssl`],
    ['server 127.0.0.1:8080;', `server 127.0.0.1:${gws[0]!.gateway.port};`],
    ['/var/www/letsencrypt', www],
    ...certPaths(cert),
  ]);
  const nginx = await nginxWith(t, site, tls);
  t.ok(nginx.ok, 'nginx -t passes', { out: nginx.out });
  await servesThrough(t, tls, cert, mine, 'nginx');

  mkdirSync(join(www, '.well-known', 'acme-challenge'), { recursive: true });
  writeFileSync(join(www, '.well-known', 'acme-challenge', 'token-1'), 'token-1.proof');
  const challenge = await send('GET', `http://127.0.0.1:${plain}/.well-known/acme-challenge/token-1`);
  t.equal(challenge.text, 'token-1.proof', "certbot's webroot challenge is served on port 80");
  const redirect = await send('GET', `http://127.0.0.1:${plain}/v1/rpc/public`, undefined, { host: 'rpc.example.com' });
  t.equal(redirect.status, 301);
  t.equal(redirect.headers.location, 'https://rpc.example.com/v1/rpc/public', 'the rest of port 80 goes to HTTPS');

  // The same check refuses a broken site: a certificate path that does not exist.
  const broken = await nginxWith(t, site.replace(cert.certFile, join(www, 'missing.pem')), await freePort());
  t.notOk(broken.ok, 'nginx -t fails on a missing certificate');
});

t.test("fleet.md's nginx balancer: nginx -t, HTTPS and WSS to two instances", async (t) => {
  const cert = testCertificate(t);
  const { gws, mine } = await gateways(t, 2);
  const tls = await freePort();
  const site = swapped(blockOf('docs/fleet.md', 'nginx', 'upstream gateways'), [
    ['listen 443 ssl', `listen 127.0.0.1:${tls} ssl`],
    ['10.0.0.11:8080', `127.0.0.1:${gws[0]!.gateway.port}`],
    ['10.0.0.12:8080', `127.0.0.1:${gws[1]!.gateway.port}`],
    ...certPaths(cert),
  ]);
  const nginx = await nginxWith(t, site, tls);
  t.ok(nginx.ok, 'nginx -t passes', { out: nginx.out });
  await servesThrough(t, tls, cert, mine, 'nginx in front of a fleet');
});

/** Caddy's state (certificates, locks) in a folder of the test's own. */
function caddyEnv(dir: string): NodeJS.ProcessEnv {
  return { ...process.env, HOME: dir, XDG_DATA_HOME: join(dir, 'data'), XDG_CONFIG_HOME: join(dir, 'config') };
}

for (const [what, marker, count] of [
  ['one instance', 'one instance on this machine', 1],
  ['a fleet', 'a fleet of instances', 2],
] as const) {
  t.test(`tls.md's Caddyfile for ${what}: caddy validate, HTTPS, WSS`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'chaingate-caddy-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const printed = blockOf('docs/tls.md', 'caddyfile', marker);
    writeFileSync(join(dir, 'Caddyfile'), printed);
    const validated = spawnSync('caddy', ['validate', '--config', join(dir, 'Caddyfile'), '--adapter', 'caddyfile'], {
      encoding: 'utf8',
      env: caddyEnv(dir),
    });
    t.equal(validated.status, 0, 'caddy validate passes on the Caddyfile as printed', { out: validated.stderr.slice(-2000) });

    const cert = testCertificate(t);
    const { gws, mine } = await gateways(t, count);
    const [tls, plain, admin] = [await freePort(), await freePort(), await freePort()];
    // The site name becomes the test's address and the certificate its own: no CA answers a test.
    const ports = gws.map((g) => `127.0.0.1:${g.gateway.port}`);
    const site = swapped(printed, [
      ['rpc.example.com {', `https://127.0.0.1:${tls} {\n\ttls ${cert.certFile} ${cert.keyFile}`],
      ...(count === 1 ? [['127.0.0.1:8080', ports[0]!] as [string, string]] : []),
      ...(count === 2 ? [['10.0.0.11:8080', ports[0]!] as [string, string], ['10.0.0.12:8080', ports[1]!] as [string, string]] : []),
    ]);
    writeFileSync(join(dir, 'Caddyfile'), `{\n\tadmin 127.0.0.1:${admin}\n\thttp_port ${plain}\n\thttps_port ${tls}\n}\n${site}`);
    await serve(t, 'caddy', ['run', '--config', join(dir, 'Caddyfile'), '--adapter', 'caddyfile'], tls, caddyEnv(dir));
    await servesThrough(t, tls, cert, mine, 'Caddy');
  });
}
