import type {
  AccountAnswer,
  ChainAnswer,
  CreatedEndpointAnswer,
  EndpointAnswer,
  EndpointSettingsAnswer,
  FailureAnswer,
  FieldProblem,
  RotatedKeyAnswer,
  UsageStats,
} from '../../src/api-answers.js';
import { readKey } from './session.js';

/**
 * A refusal of the management API: its HTTP status, the message and code its error body gave, and for a
 * refused body the problems naming each field (`error.fields`).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code = '',
    readonly fields: readonly FieldProblem[] = [],
  ) {
    super(message);
  }
}

export type {
  AccountAnswer as Account,
  ChainAnswer as Chain,
  CreatedEndpointAnswer as CreatedEndpoint,
  EndpointAnswer as Endpoint,
  EndpointSettingsAnswer as EndpointSettings,
  FailureAnswer as Failure,
  RotatedKeyAnswer as RotatedKey,
  UsageStats as Usage,
} from '../../src/api-answers.js';

/**
 * One call of the management API on this page's own origin, with the signed-in key (or `key`, to try
 * one before keeping it). Resolves to the parsed body; a refusal rejects with the API's own message.
 */
async function call(method: string, path: string, body?: unknown, key: string | null = readKey()): Promise<unknown> {
  const headers: Record<string, string> = { authorization: `Bearer ${key ?? ''}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      cache: 'no-store',
      credentials: 'omit',
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch {
    throw new ApiError(0, 'The gateway cannot be reached: check that it is running, then try again');
  }
  const parsed: unknown = await res.json().catch(() => null);
  if (!res.ok) {
    const error = (parsed as { error?: { message?: unknown; code?: unknown; fields?: unknown } } | null)?.error;
    const message = error?.message;
    throw new ApiError(
      res.status,
      typeof message === 'string' ? message : `The gateway answered ${res.status}`,
      typeof error?.code === 'string' ? error.code : '',
      Array.isArray(error?.fields) ? (error.fields as FieldProblem[]) : [],
    );
  }
  return parsed;
}

export const data = async <T>(method: string, path: string, body?: unknown, key?: string): Promise<T> =>
  ((await call(method, path, body, key)) as { data: T }).data;

export const api = {
  account: (key?: string) => data<AccountAnswer>('GET', '/api/dashboard/account', undefined, key),
  chains: () => data<ChainAnswer[]>('GET', '/api/dashboard/chains'),
  async endpoints(): Promise<EndpointAnswer[]> {
    const all: EndpointAnswer[] = [];
    let cursor: string | undefined;
    do {
      const query = `limit=1000${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
      const page = (await call('GET', `/api/dashboard/endpoints?${query}`)) as { data: EndpointAnswer[]; next_cursor?: string };
      all.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor !== undefined);
    return all;
  },
  createEndpoint: (network: string, name: string | undefined) =>
    data<CreatedEndpointAnswer>('POST', '/api/dashboard/endpoints', name === undefined ? { network } : { network, name }),
  /** Changes the settings `patch` names (null clears one); answers the endpoint as it now is. */
  patchEndpoint: (id: string, patch: Partial<Record<keyof EndpointSettingsAnswer, unknown>>) =>
    data<EndpointAnswer>('PATCH', `/api/dashboard/endpoints?id=${encodeURIComponent(id)}`, patch),
  rotateKey: (id: string, graceS: number) =>
    data<RotatedKeyAnswer>('POST', `/api/dashboard/endpoints/rotate?id=${encodeURIComponent(id)}`, { grace_s: graceS }),
  /** The endpoint's recent failed calls, newest first. */
  failures: (id: string, limit = 100) =>
    data<FailureAnswer[]>('GET', `/api/dashboard/endpoints/failures?id=${encodeURIComponent(id)}&limit=${limit}`),
  deleteEndpoint: (id: string) => data<{ id: string; deleted: true }>('DELETE', `/api/dashboard/endpoints?id=${encodeURIComponent(id)}`),
  usage(query: { id?: string; method?: string; from: number; to: number; interval: 'minute' | 'hour' | 'day' }): Promise<UsageStats> {
    const params = new URLSearchParams({ from: String(query.from), to: String(query.to), interval: query.interval });
    if (query.id !== undefined) params.set('id', query.id);
    if (query.method !== undefined) params.set('method', query.method);
    return data<UsageStats>('GET', `/api/dashboard/endpoints/stats?${params}`);
  },
};
