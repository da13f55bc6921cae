// What one call of uWS's res.getRemoteAddress() costs, timed in this process on a real request: the
// peer's address comes back as a new ArrayBuffer each time, which is what an endpoint's address list
// adds to a keyed request (bench/fences.mjs).
import { createRequire } from 'node:module';
import { request } from 'node:http';

const require = createRequire(import.meta.url);

/** Microseconds per getRemoteAddress() call, over `calls` calls inside one request's handler. */
export function addressReadUs(calls = 200_000) {
  const uWS = require('@trufflesuite/uws-js-unofficial');
  return new Promise((resolve, reject) => {
    let us = null;
    const app = uWS.App().any('/*', (res) => {
      const started = process.hrtime.bigint();
      for (let i = 0; i < calls; i++) res.getRemoteAddress();
      us = Number(process.hrtime.bigint() - started) / 1000 / calls;
      res.end('ok');
    });
    app.listen('127.0.0.1', 0, (listenSocket) => {
      if (!listenSocket) return reject(new Error('uWS did not listen'));
      const port = uWS.us_socket_local_port(listenSocket);
      request({ host: '127.0.0.1', port, path: '/' }, (res) => {
        res.resume();
        res.on('end', () => {
          uWS.us_listen_socket_close(listenSocket);
          resolve(us);
        });
      })
        .on('error', reject)
        .end();
    });
  });
}
