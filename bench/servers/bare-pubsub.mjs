// The floor of the fan-out bench: a bare uWS pub/sub relay. It holds one newHeads subscription at the
// node (over the `ws` client, as chaingate's upstream link does) and app.publish()es each notification
// frame, untouched, to the clients subscribed to its topic; uWS sends it to every subscriber from C++.
// What is left of its CPU per notification is what the kernel's sends cost.
//
// A client's eth_subscribe newHeads is answered with the node's own subscription id, so the frames a
// client receives are the node's, byte for byte; anything else gets a JSON-RPC error.
// Socket settings match chaingate's: no compression, 120 s idle timeout with automatic pings.
//
// Usage: node bare-pubsub.mjs <node ws URL> [port]; prints `Listening on 127.0.0.1:PORT` once its
// upstream subscription is open.
import { listenAndAnnounce, loadUws } from './uws-server.mjs';
import WebSocket from 'ws';

const [nodeUrl, portArg] = process.argv.slice(2);
if (!nodeUrl) {
  process.stderr.write('usage: bare-pubsub.mjs <node ws URL> [port]\n');
  process.exit(2);
}
const TOPIC = 'newHeads';

/** Opens the single upstream subscription; resolves with the node's subscription id. */
function subscribeUpstream(onFrame) {
  return new Promise((resolve, reject) => {
    const upstream = new WebSocket(nodeUrl, { perMessageDeflate: false });
    let subscription = null;
    upstream.on('open', () => upstream.send('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}'));
    upstream.on('error', reject);
    upstream.on('close', () => {
      process.stderr.write('bare pub/sub: the node closed the upstream socket\n');
      process.exit(1);
    });
    upstream.on('message', (data, isBinary) => {
      if (subscription !== null) {
        onFrame(data, isBinary);
        return;
      }
      const answer = JSON.parse(data.toString());
      if (typeof answer.result !== 'string') reject(new Error(`eth_subscribe answered ${data}`));
      subscription = answer.result;
      resolve(subscription);
    });
  });
}

const uWS = await loadUws();
const app = uWS.App();
const subscription = await subscribeUpstream((frame, isBinary) => app.publish(TOPIC, frame, isBinary));

app
  .ws('/*', {
    compression: uWS.DISABLED,
    idleTimeout: 120,
    sendPingsAutomatically: true,
    maxPayloadLength: 1 << 20,
    // As chaingate's: high enough that no send is ever dropped for a reading client.
    maxBackpressure: 64 << 20,
    message(ws, message, isBinary) {
      if (isBinary) return;
      let req;
      try {
        req = JSON.parse(Buffer.from(message).toString());
      } catch {
        ws.send('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}');
        return;
      }
      const id = JSON.stringify(req?.id ?? null);
      if (req?.method === 'eth_subscribe' && req.params?.[0] === TOPIC) {
        ws.subscribe(TOPIC);
        ws.send(`{"jsonrpc":"2.0","id":${id},"result":"${subscription}"}`);
      } else {
        ws.send(`{"jsonrpc":"2.0","id":${id},"error":{"code":-32601,"message":"only eth_subscribe newHeads here"}}`);
      }
    },
  })
  .any('/*', (res) => {
    res.writeStatus('404 Not Found').end();
  });

listenAndAnnounce(uWS, app, 'bare pub/sub', Number(portArg ?? 0));
