/**
 * A node in the process, for tests of the road from a call to a chain's nodes (pipeline/route-call.ts) that need
 * answers no real node gives on cue: each call is answered a millisecond later with the answer given (a result, a
 * node error, or a refused connection), whatever the method, and counted.
 */
import type { HttpUpstream, RequestHandle, ResponseSink, UpstreamRequest } from '../../src/upstreams/http-client.js';
import { UpstreamError } from '../../src/upstreams/upstream-error.js';

/** What a stand-in node answers: a result, a node error, or a failure to connect. */
export type StandInAnswer = { result: unknown } | { error: { code: number; message: string } } | 'unreachable';

export interface StandInNode extends HttpUpstream {
  /** The method of each call received, in order. */
  readonly methods: string[];
}

export function standInNode(label: string, answer: StandInAnswer): StandInNode {
  const self: StandInNode = {
    label,
    methods: [],
    request(req: UpstreamRequest, sink: ResponseSink): RequestHandle {
      const call = JSON.parse(String(req.body)) as { id: number; method: string };
      self.methods.push(call.method);
      const timer = setTimeout(() => {
        if (answer === 'unreachable') return sink.onError(new UpstreamError('connect', `${label}: refused`));
        const text = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: call.id, ...answer }));
        sink.onHead(200, [], text.length);
        sink.onData(text);
        sink.onEnd();
      }, 1);
      const abort = (): void => clearTimeout(timer);
      return { abort, resume() {}, distrust: abort };
    },
    stats: () => ({ open: 0, busy: 0, queued: 0 }),
    close() {},
  };
  return self;
}
