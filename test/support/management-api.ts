/**
 * The management API alone on a uWS app on a loopback port, over a given account store and config: what the
 * management tests call (`test/server/management*.test.ts`). Store faults fail the test, balances are 0 and
 * deletions go unheard unless `deps` says otherwise (a fleet's balance, a listener for deletions or faults).
 */
import type { Test } from 'tap';
import type { AccountStore } from '../../src/accounts/account-store.js';
import type { Config } from '../../src/config/schema.js';
import { createSlidingWindowLimiter } from '../../src/limits/sliding-window.js';
import { createUnknownKeyGuard } from '../../src/limits/unknown-keys.js';
import { handleManagement, type ManagementDeps } from '../../src/server/management.js';
import { closeApp, uws } from '../../src/server/uws.js';

// biome-ignore lint/suspicious/noExplicitAny: test JSON
type Json = any;

/** One call: the key as a Bearer token, a JSON body when given; the answer's status, JSON and headers. */
export type ManagementApi = (
  key: string,
  method: string,
  path: string,
  body?: unknown,
) => Promise<{ status: number; json: Json; headers: Headers }>;

export async function serveManagement(
  t: Test,
  accounts: AccountStore,
  config: Config,
  deps: Partial<ManagementDeps> = {},
): Promise<ManagementApi> {
  const all: ManagementDeps = {
    config,
    accounts,
    balance: () => 0,
    onEndpointDeleted: () => {},
    limiter: createSlidingWindowLimiter(),
    unknownKeys: createUnknownKeyGuard(),
    clientIp: () => '127.0.0.1',
    onStoreFault: (during, err) => t.fail(`store fault during ${during}: ${err.message}`),
    ...deps,
  };
  const app = uws().App();
  app.any('/*', (res, req) => handleManagement(all, res, req, req.getMethod(), req.getUrl(), { allowOrigin: undefined }));
  const port = await new Promise<number>((resolve, reject) =>
    app.listen('127.0.0.1', 0, (socket) => (socket ? resolve(uws().us_socket_local_port(socket)) : reject(new Error('no listen')))),
  );
  t.teardown(() => closeApp(app));
  return async (key, method, path, body) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, json: await res.json(), headers: res.headers };
  };
}
