// A stand-in Ethereum node that answers every POST with the same eth_blockNumber result, over keep-alive
// HTTP/1.1. It costs ~11 µs per request, so a proxy in front of it is measured, not the node.
// Prints `Listening on 127.0.0.1:PORT` once bound (port 0 unless given as argv[2]); stops on SIGTERM/SIGINT.
import { createRequire } from 'node:module';

const ANSWER = '{"jsonrpc":"2.0","id":1,"result":"0x1b4"}';

/** chaingate's own loader when built (it picks the native build that fits), else the bundled package. */
async function loadUws() {
  try {
    const { uws } = await import('../../dist/server/uws.js');
    return uws();
  } catch {
    return createRequire(import.meta.url)('@trufflesuite/uws-js-unofficial');
  }
}

const uWS = await loadUws();
let listenSocket = null;

uWS
  .App()
  .post('/*', (res) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    // The body is read to its end before answering, as a node would, so pipelined bodies stay framed.
    res.onData((_chunk, isLast) => {
      if (!isLast || aborted) return;
      res.cork(() => res.writeHeader('content-type', 'application/json').end(ANSWER));
    });
  })
  .any('/*', (res) => {
    res.writeStatus('405 Method Not Allowed').end();
  })
  .listen('127.0.0.1', Number(process.argv[2] ?? 0), (token) => {
    if (!token) {
      process.stderr.write('fixed upstream: cannot listen\n');
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
