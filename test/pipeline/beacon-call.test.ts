/**
 * A Beacon request's road in the pipeline (pipeline/beacon-call.ts), without a listener: admission refusals,
 * and the forward on the chain's one road to its nodes: a GET whose node cannot be reached goes once to
 * another node, a POST never does, and every attempt is counted in its node's health. Over a fake beacon node
 * and a closed port.
 */
import t, { type Test } from 'tap';
import { admitBeacon, type BeaconCall, type BeaconOut, forwardBeacon } from '../../src/pipeline/beacon-call.js';
import type { ErrorCode } from '../../src/errors.js';
import { fakeBeacon } from '../support/fake-beacon.js';
import { closedPort } from '../support/fake-upstream.js';
import { pipelineContext, publicCaller } from '../support/pipeline-context.js';

interface Written {
  status: number | null;
  headers: Array<readonly [string, string]>;
  body: string;
  error: ErrorCode | null;
  done: Promise<void>;
}

function collector(): { out: BeaconOut; written: Written } {
  let ended!: () => void;
  const written: Written = { status: null, headers: [], body: '', error: null, done: new Promise((r) => (ended = r)) };
  const out: BeaconOut = {
    gone: false,
    head(status, headers) {
      written.status = status;
      written.headers = [...headers];
    },
    data(chunk) {
      written.body += chunk.toString();
      return true;
    },
    end: () => ended(),
    cut: () => ended(),
    error(code) {
      written.error = code;
      ended();
    },
  };
  return { out, written };
}

async function setup(t: Test) {
  const node = await fakeBeacon(t);
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const s = pipelineContext(t, {
    chains: { 'devnet-beacon': { kind: 'beacon', upstreams: [{ url: dead }, { url: node.url }] } },
  });
  return { node, s, chain: s.chain('devnet-beacon') };
}

function admitted(s: ReturnType<typeof pipelineContext>, method: string, path: string): BeaconCall {
  const a = admitBeacon(s.ctx, publicCaller(s), method, path, '', []);
  if (a.kind !== 'call') throw new Error(`not admitted: ${JSON.stringify(a)}`);
  return a.call;
}

t.test('a GET whose node cannot be reached is answered by the other node; each attempt counted', async (t) => {
  const { node, s, chain } = await setup(t);
  // The node is drawn at random: 40 GETs all but surely try the dead one (each has even odds of it first).
  const GETS = 40;
  let failed = 0;
  for (let k = 0; k < GETS; k++) {
    const { out, written } = collector();
    forwardBeacon(s.ctx, chain, publicCaller(s), admitted(s, 'GET', '/eth/v1/node/version'), undefined, out);
    await written.done;
    if (written.status !== 200 || !/node\/version/.test(written.body)) failed++;
  }
  t.equal(failed, 0, "every GET answered with the live node's status and body");
  t.equal(node.requests.length, GETS, 'every GET reached the live node once');
  t.ok(chain.health.upstreams[0]!.status().calls > 0, 'the dead node was tried and counted');
  t.same(
    chain.health.upstreams.map((u) => u.inflight),
    [0, 0],
  );
});

t.test('a POST is never sent to a second node: a dead node is a 502', async (t) => {
  const { node, s, chain } = await setup(t);
  const outcomes: Array<number | ErrorCode | null> = [];
  for (let k = 0; k < 6; k++) {
    const { out, written } = collector();
    forwardBeacon(s.ctx, chain, publicCaller(s), admitted(s, 'POST', '/eth/v1/beacon/pool/attestations'), Buffer.from('[]'), out);
    await written.done;
    outcomes.push(written.error ?? written.status);
  }
  const refused = outcomes.filter((o) => o === 'upstream_error').length;
  t.ok(refused > 0, 'the dead node answered some POSTs with a 502');
  t.equal(node.requests.length, outcomes.length - refused, 'the live node saw only the others');
});

t.test('admission: path, verb and query refusals in order, the events path handed over', async (t) => {
  const { s } = await setup(t);
  const caller = publicCaller(s);
  t.match(admitBeacon(s.ctx, caller, 'GET', '/eth/v1/nope', '', []), { refused: 'not_found' });
  t.match(admitBeacon(s.ctx, caller, 'DELETE', '/eth/v1/node/version', '', []), { refused: 'method_not_allowed' });
  t.same(admitBeacon(s.ctx, caller, 'GET', '/eth/v1/events', 'topics=head', []), { kind: 'events' });
  t.match(admitBeacon(s.ctx, caller, 'GET', '/eth/v1/node/version', 'a=1', [['accept', 'application/json']]), {
    call: { method: 'GET', target: '/eth/v1/node/version?a=1', headers: [['accept', 'application/json']] },
  });
});
