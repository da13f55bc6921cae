/**
 * The upstream client asks before it writes a request to the node a second time (UpstreamOptions.sendAgain): a move
 * off a stalled socket and a re-send after a lost socket are each one more call to a provider that counts them.
 */
import t, { type Test } from 'tap';
import { createHttpUpstream, type HttpUpstream, type UpstreamOptions } from '../../src/upstreams/http-client.js';
import { exchange } from './exchange-harness.js';
import { closingAfterFirst, ok, pipeliningServer, post } from './pipelining-server.js';

/** An upstream whose sendAgain lets `room` second writes go and records each ask. */
function upstreamWith(t: Test, opts: UpstreamOptions, room: number): { upstream: HttpUpstream; asked: boolean[] } {
  const asked: boolean[] = [];
  const upstream = createHttpUpstream({
    ...opts,
    sendAgain: (stillOnItsSocket) => {
      asked.push(stillOnItsSocket);
      return room-- > 0;
    },
  });
  t.teardown(() => upstream.close());
  return { upstream, asked };
}

t.test('requests behind a stalled head move to another socket only with room in the budget', async (t) => {
  for (const room of [0, 1]) {
    const server = await pipeliningServer(t, ({ token }) => (token === 'hang' ? null : ok(`answer-${token}`)));
    const { upstream, asked } = upstreamWith(t, { url: server.url, maxConnections: 2, stallMs: 50 }, room);
    const head = exchange(upstream, post('hang', 1500));
    const behind = ['2', '3'].map((token) => exchange(upstream, post(token, 400)));
    const outcomes = await Promise.all(behind.map((e) => e.settled));
    t.same(
      outcomes.map((o) => o.error?.kind ?? o.body.toString()),
      room === 0 ? ['timeout', 'timeout'] : ['answer-2', 'timeout'],
      `room for ${room}: only that many moved, the rest wait on their socket`,
    );
    t.same(
      server.arrivals.map((a) => [a.connection, a.token]),
      [[0, 'hang'], [0, '2'], [0, '3'], ...(room === 0 ? [] : [[1, '2']])],
      `room for ${room}: the node got no request more than that`,
    );
    t.ok(asked.length > room && asked.every((still) => still), 'each move asked, its first copy still on its socket');
    await head.settled;
  }
});

t.test('a stalled head with no other socket to move to: the budget is never asked, sweep after sweep', async (t) => {
  const server = await pipeliningServer(t, ({ token }) => (token === 'hang' ? null : ok(`answer-${token}`)));
  const { upstream, asked } = upstreamWith(t, { url: server.url, maxConnections: 1, stallMs: 50 }, 100);
  const head = exchange(upstream, post('hang', 1200));
  const behind = ['2', '3'].map((token) => exchange(upstream, post(token, 600)));
  await Promise.all(behind.map((e) => e.settled));
  // About five sweeps passed with the head stalled; each found no socket, so none spent a call of the budget.
  t.same(asked, [], 'no move was possible, and none was charged');
  t.same(
    server.arrivals.map((a) => a.token),
    ['hang', '2', '3'],
    'each request reached the node once',
  );
  await head.settled;
});

t.test('a socket lost with requests behind its head: re-sent only with room in the budget', async (t) => {
  for (const close of ['destroy', 'Connection: close'] as const) {
    const server = await closingAfterFirst(t, close);
    const { upstream, asked } = upstreamWith(t, { url: server.url, maxConnections: 1 }, 1);
    const outcomes = await Promise.all(['1', '2', '3'].map((token) => exchange(upstream, post(token)).settled));
    t.same(
      outcomes.map((o) => o.error?.kind ?? o.body.toString()),
      ['answer-1', 'answer-2', 'reset'],
      `${close}: the one with room is sent again, the other fails`,
    );
    t.same(
      server.arrivals.map((a) => `${a.connection}:${a.token}`),
      ['0:1', '0:2', '0:3', '1:2'],
      `${close}: the node got one request more, not two`,
    );
    t.same(asked, [false, false], `${close}: both asked, the copies gone with the socket`);
  }
});
