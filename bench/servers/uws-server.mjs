// What the bench's uWS servers share: loading uWS, listening with the line the bench waits for, stopping.
import { createRequire } from 'node:module';

/** chaingate's own loader when built (it picks the native build that fits), else the bundled package. */
export async function loadUws() {
  try {
    const { uws } = await import('../../dist/server/uws.js');
    return uws();
  } catch {
    return createRequire(import.meta.url)('@trufflesuite/uws-js-unofficial');
  }
}

/**
 * Listens on 127.0.0.1:`port` (0: any), prints `Listening on 127.0.0.1:PORT` once bound (or exits 1
 * naming `name`), and closes the listen socket and exits on SIGTERM/SIGINT.
 */
export function listenAndAnnounce(uWS, app, name, port) {
  let listenSocket = null;
  app.listen('127.0.0.1', port, (token) => {
    if (!token) {
      process.stderr.write(`${name}: cannot listen\n`);
      process.exit(1);
    }
    listenSocket = token;
    process.stdout.write(`Listening on 127.0.0.1:${uWS.us_socket_local_port(token)}\n`);
  });
  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => {
      if (listenSocket) uWS.us_listen_socket_close(listenSocket);
      process.exit(0);
    });
  }
}
