import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, waitForPort } from './net.mjs';
import { startProcess } from './processes.mjs';

/**
 * The nginx binary: BENCH_NGINX when set (and only it), else nginx on PATH or in the usual sbin
 * directories (Debian's is /usr/sbin/nginx, off a user's PATH). null when none runs.
 */
export function nginxPath() {
  const candidates = process.env.BENCH_NGINX
    ? [process.env.BENCH_NGINX]
    : ['nginx', '/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx'];
  for (const candidate of candidates) {
    const r = spawnSync(candidate, ['-v']);
    if (!r.error) return candidate;
  }
  return null;
}

export function nginxVersion(bin) {
  const r = spawnSync(bin, ['-v']);
  return /nginx\/(\S+)/.exec(`${r.stdout}${r.stderr}`)?.[1] ?? null;
}

/**
 * The reference proxy: `workers` worker processes (1, or 2 beside chaingate's two worker threads),
 * upstream keep-alive (HTTP/1.1 with the Connection header cleared; its 64 idle connections are per
 * worker), no access log. Everything nginx writes (pid, logs, temp files) stays in `dir`. Other settings
 * are nginx's defaults, as an operator would deploy it.
 */
export function nginxProxyConf({ dir, port, upstreamPort, workers = 1 }) {
  return `worker_processes ${workers};
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream node {
    server 127.0.0.1:${upstreamPort};
    keepalive 64;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://node;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`;
}

/**
 * nginx proxying to 127.0.0.1:`upstreamPort` with `workers` worker processes, on `core` (a core or a list,
 * `0,1`, which its workers inherit); resolves `{ proc, pid, port, stop }` once it listens.
 */
export async function startNginxProxy({ bin, name = 'nginx', dir, upstreamPort, core, workers = 1 }) {
  mkdirSync(dir, { recursive: true });
  // Run as root, nginx's workers switch to an unprivileged user, which must be able to enter `dir`.
  chmodSync(dir, 0o755);
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, nginxProxyConf({ dir, port, upstreamPort, workers }));
  const proc = startProcess(name, bin, ['-p', dir, '-c', conf, '-e', join(dir, 'error.log'), '-g', 'daemon off;'], { core });
  try {
    await waitForPort(port, proc);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { proc, pid: proc.pid, port, stop: () => proc.stop() };
}
