// A stand-in Ethereum node that answers every POST with the same eth_blockNumber result, over keep-alive
// HTTP/1.1. It costs ~11 µs per request, so a proxy in front of it is measured, not the node.
// Prints `Listening on 127.0.0.1:PORT` once bound (port 0 unless given as argv[2]); stops on SIGTERM/SIGINT.
import { listenAndAnnounce, loadUws } from './uws-server.mjs';

const ANSWER = '{"jsonrpc":"2.0","id":1,"result":"0x1b4"}';

const uWS = await loadUws();

const app = uWS
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
  });

listenAndAnnounce(uWS, app, 'fixed upstream', Number(process.argv[2] ?? 0));
