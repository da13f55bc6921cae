import { createHash, timingSafeEqual } from 'node:crypto';
import type { Metrics } from '../metrics/registry.js';
import { type CordonDeps, cordonRequest } from './cordon-route.js';
import { type ResponseMeta, responseMeta, sendWhole } from './respond.js';
import type { StatusReport } from './status-report.js';
import type { HttpRequest, HttpResponse, TemplatedApp } from './uws.js';

/** The exposition format's content type, as Prometheus asks for it. */
const EXPOSITION_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/**
 * `GET /metrics` (and `GET /status`, for `chaingate status`; `POST /upstreams/cordon` and `/upstreams/uncordon`,
 * for `chaingate upstream`, cordon-route.ts) on the metrics listener (its own port, loopback by default, so the main listener
 * never serves it to tenants). With `token`, a scrape must send `Authorization: Bearer <token>`; the
 * comparison is of digests in constant time, so its duration says nothing of the token.
 */
export function serveMetrics(
  app: TemplatedApp,
  metrics: Metrics,
  token: string | undefined,
  status: () => Promise<StatusReport>,
  cordon?: CordonDeps,
): void {
  const expected = token === undefined ? null : digest(token);
  /** False (and the 401 sent) when a token is configured and the request does not carry it. */
  const allowed = (res: HttpResponse, req: HttpRequest, meta: ResponseMeta): boolean => {
    if (expected === null) return true;
    const m = /^Bearer\s+(\S+)$/i.exec(req.getHeader('authorization'));
    if (m !== null && timingSafeEqual(digest(m[1]!), expected)) return true;
    sendWhole(res, 401, meta, 'text/plain', 'metrics need Authorization: Bearer <metrics.token>\n', [
      ['www-authenticate', 'Bearer realm="chaingate metrics"'],
    ]);
    return false;
  };
  /** Answers with what `produce` resolves to; a client gone before then gets nothing. */
  const serveLater = (what: string, type: string, produce: () => Promise<string>) => (res: HttpResponse, req: HttpRequest) => {
    const meta = responseMeta(req, undefined);
    if (!allowed(res, req, meta)) return;
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    produce().then(
      (body) => {
        if (!aborted) sendWhole(res, 200, meta, type, body);
      },
      (err: unknown) => {
        if (!aborted) sendWhole(res, 500, meta, 'text/plain', `collecting the ${what} failed: ${String(err)}\n`);
      },
    );
  };
  // What `chaingate status` reads: the same listener and token as the scrape.
  app.get(
    '/status',
    serveLater('status', 'application/json', async () => JSON.stringify(await status())),
  );
  app.get(
    '/metrics',
    serveLater('metrics', EXPOSITION_TYPE, () => metrics.text()),
  );
  if (cordon !== undefined)
    for (const [path, on] of [
      ['/upstreams/cordon', true],
      ['/upstreams/uncordon', false],
    ] as const)
      app.post(path, (res, req) => {
        const meta = responseMeta(req, undefined);
        if (!allowed(res, req, meta)) return;
        const r = cordonRequest(cordon, req.getQuery() ?? '', on);
        sendWhole(res, r.status, meta, 'application/json', r.body);
      });
  app.any('/*', (res, req) =>
    sendWhole(
      res,
      404,
      responseMeta(req, undefined),
      'text/plain',
      'the metrics listener serves GET /metrics, GET /status and POST /upstreams/cordon|uncordon only\n',
    ),
  );
}
