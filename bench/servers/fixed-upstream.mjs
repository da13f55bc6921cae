// A stand-in Ethereum node that answers every POST with the same eth_blockNumber result, over keep-alive
// HTTP/1.1, under the request's own id as a node echoes it (chaingate refuses an answer with another id).
// It costs ~11 µs per request, so a proxy in front of it is measured, not the node.
// Prints `Listening on 127.0.0.1:PORT` once bound (port 0 unless given as argv[2]); stops on SIGTERM/SIGINT.
import { listenAndAnnounce, loadUws } from './uws-server.mjs';

const ID_KEY = Buffer.from('"id":');

/** The answer to a request body: its id's text (up to the next comma or brace), or null when it has none. */
function answerTo(body) {
  const at = body.indexOf(ID_KEY);
  if (at < 0) return '{"jsonrpc":"2.0","id":null,"result":"0x1b4"}';
  const from = at + ID_KEY.length;
  let to = from;
  while (to < body.length && body[to] !== 0x2c && body[to] !== 0x7d) to++;
  return `{"jsonrpc":"2.0","id":${body.latin1Slice(from, to)},"result":"0x1b4"}`;
}

const uWS = await loadUws();

const app = uWS
  .App()
  .post('/*', (res) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    // The body is read to its end before answering, as a node would, so pipelined bodies stay framed. Its
    // chunks live only during the callback: the first (which holds the id) is copied.
    let first = null;
    res.onData((chunk, isLast) => {
      if (first === null) first = Buffer.from(chunk.slice(0, 64));
      if (!isLast || aborted) return;
      const answer = answerTo(first);
      res.cork(() => res.writeHeader('content-type', 'application/json').end(answer));
    });
  })
  .any('/*', (res) => {
    res.writeStatus('405 Method Not Allowed').end();
  });

listenAndAnnounce(uWS, app, 'fixed upstream', Number(process.argv[2] ?? 0));
