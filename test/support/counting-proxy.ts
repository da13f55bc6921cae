/**
 * An HTTP proxy in front of a real node that records every JSON-RPC call passing through it (batch
 * items one by one), so a test can tell which calls reached the upstream. It may hold chosen calls
 * back for a while, to keep them in flight, or answer them HTTP 500 itself, as a node that cannot
 * serve them, or 429 with a Retry-After, as a provider over its quota. Listens on 127.0.0.1 port 0; closed at teardown.
 */
import { Agent, createServer, request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Test } from 'tap';

/** What answer()'s `give` returns to answer with a JSON-RPC error object instead of a result. */
export class AnswerError {
  constructor(
    readonly code: number,
    readonly message: string,
  ) {}
}

export interface SeenCall {
  method: string;
  params: unknown[];
  /** When it arrived (performance.now(); absent on calls a test makes up). */
  at?: number;
}

export interface CountingProxy {
  url: string;
  /** Every call received, in arrival order. */
  readonly calls: SeenCall[];
  /** Calls received of `method`, and with exactly these params when given (compared as JSON). */
  count(method: string, params?: unknown[]): number;
  /** Holds answers to calls for which `hold` returns a delay in ms (0 or undefined: none). */
  delay(hold: ((call: SeenCall) => number | undefined) | null): void;
  /** Answers HTTP 500 (never reaching the node) to a request holding a call for which `refuse` is true. */
  fail(refuse: ((call: SeenCall) => boolean) | null): void;
  /** Answers a lone call itself with the result `give` returns for it (an AnswerError: that error object), never
   *  reaching the node; undefined forwards it. For a node made to serve another chain id (eth_chainId) than the node behind it. */
  answer(give: ((call: SeenCall) => unknown) | null): void;
  /** Answers HTTP 429 (never reaching the node) to a request holding a call for which `throttle` returns a
   *  Retry-After value ('' for none). */
  throttle(give: ((call: SeenCall) => string | undefined) | null): void;
  /** Resolves once `n` calls of `method` have been received. */
  received(method: string, n?: number): Promise<void>;
}

export async function countingProxy(t: Test, upstreamUrl: string): Promise<CountingProxy> {
  const target = new URL(upstreamUrl);
  const agent = new Agent({ keepAlive: true });
  const calls: SeenCall[] = [];
  const waiters: Array<{ method: string; n: number; resolve: () => void }> = [];
  let hold: ((call: SeenCall) => number | undefined) | null = null;
  let refuse: ((call: SeenCall) => boolean) | null = null;
  let give: ((call: SeenCall) => unknown) | null = null;
  let throttle: ((call: SeenCall) => string | undefined) | null = null;
  const count = (method: string, params?: unknown[]): number =>
    calls.filter((c) => c.method === method && (params === undefined || JSON.stringify(c.params) === JSON.stringify(params))).length;

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const body = Buffer.concat(chunks);
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString());
      } catch {
        parsed = undefined;
      }
      const items = (Array.isArray(parsed) ? parsed : [parsed]).filter(
        (x): x is { method: string; params?: unknown[] } =>
          x !== null && typeof x === 'object' && typeof (x as { method?: unknown }).method === 'string',
      );
      let wait = 0;
      let failed = false;
      let retryAfter: string | undefined;
      for (const item of items) {
        const call = { method: item.method, params: item.params ?? [], at };
        calls.push(call);
        wait = Math.max(wait, hold?.(call) ?? 0);
        failed ||= refuse?.(call) === true;
        retryAfter ??= throttle?.(call);
      }
      for (const w of waiters.splice(0)) {
        if (count(w.method) >= w.n) w.resolve();
        else waiters.push(w);
      }
      const forward = (): void => {
        const up = httpRequest(
          {
            host: target.hostname,
            port: target.port,
            path: target.pathname,
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
          },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, { 'content-type': 'application/json' });
            answer.pipe(res);
          },
        );
        up.on('error', () => res.destroy());
        up.end(body);
      };
      const lone = !Array.isArray(parsed) && items.length === 1 ? items[0]! : null;
      const given = lone === null ? undefined : give?.({ method: lone.method, params: lone.params ?? [] });
      if (given !== undefined) {
        const id = (lone as { id?: unknown }).id ?? null;
        const body = given instanceof AnswerError ? { error: { code: given.code, message: given.message } } : { result: given };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id, ...body }));
      } else if (failed) res.writeHead(500, { 'content-type': 'text/plain' }).end('node trouble');
      else if (retryAfter !== undefined)
        res.writeHead(429, { 'content-type': 'text/plain', ...(retryAfter === '' ? {} : { 'retry-after': retryAfter }) }).end('over quota');
      else if (wait > 0) setTimeout(forward, wait);
      else forward();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  t.teardown(() => {
    agent.destroy();
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    count,
    delay(h) {
      hold = h;
    },
    fail(r) {
      refuse = r;
    },
    answer(g) {
      give = g;
    },
    throttle(g) {
      throttle = g;
    },
    received(method, n = 1) {
      if (count(method) >= n) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ method, n, resolve }));
    },
  };
}
