/**
 * The one error table. Every refusal the gateway makes is a row here: a stable string code, the HTTP
 * status, the JSON-RPC code and default message. The Beacon shape ({code: status, message}) and the
 * management shape ({error: {code, message}}) are derived from the same row, and every error body is
 * turned into bytes by the functions below and nowhere else.
 */
export const ERRORS = {
  unauthorized: { http: 401, rpc: -32001, message: 'Missing or invalid API key' },
  insufficient_balance: { http: 402, rpc: -32002, message: 'Insufficient RU balance' },
  rate_limited: { http: 429, rpc: -32005, message: 'Rate limit exceeded' },
  upstream_error: { http: 502, rpc: -32603, message: 'Upstream node error' },
  // A node's answer that failed the gateway's checks (docs/consistency.md) and no other node answered instead.
  upstream_answer_invalid: { http: 502, rpc: -32603, message: "Upstream node's answer failed the gateway's checks" },
  // A method the chain asks of several nodes (consistency.quorum) without enough of them agreeing: a 502 as a node
  // failure is (retrying is right: nodes a block apart agree a moment later); the message never says which answers.
  no_quorum: { http: 502, rpc: -32603, message: 'Nodes disagreed on the answer' },
  // Every node that could take the call is at its budget (upstreams[].rps, max_in_flight) or cooling down after a
  // 429 (docs/failover.md): a 503, as the gateway itself holds the call back; retrying shortly is right.
  upstream_budget: {
    http: 503,
    rpc: -32099,
    message: 'Every node is at its rate budget (rps, max_in_flight) or cooling down after a 429; try again shortly',
  },
  store_unavailable: { http: 503, rpc: -32099, message: 'Service temporarily unavailable' },
  body_too_large: { http: 413, rpc: -32600, message: 'Request body is larger than the limit' },
  batch_too_large: { http: 413, rpc: -32600, message: 'Batch is larger than the limit' },
  unsupported_media_type: { http: 415, rpc: -32600, message: 'Content-Type must be application/json' },
  // Protocol errors travel with HTTP 200, as execution nodes answer them.
  parse_error: { http: 200, rpc: -32700, message: 'Parse error' },
  invalid_request: { http: 200, rpc: -32600, message: 'Invalid request' },
  method_not_found: { http: 200, rpc: -32601, message: 'Method not found' },
  // A method that exists but needs a node's keys or administration: -32601 still, which clients
  // already read as "not supported here"; the message says why it is refused.
  node_local_method: { http: 200, rpc: -32601, message: 'Method not served: it needs a node of your own' },
  invalid_params: { http: 200, rpc: -32602, message: 'Invalid params' },
  // EIP-1474's "method not supported": the method exists and the gateway serves it, but not to this caller's
  // plan (or the keyless path), so a client can tell it from -32601 (no such method) and from -32005 (retry later).
  method_not_in_plan: { http: 200, rpc: -32004, message: 'Method not available on this plan' },
  // Routing errors: not JSON-RPC errors, answered in the JSON shape of the path's family.
  not_found: { http: 404, rpc: -32601, message: 'Not found' },
  method_not_allowed: { http: 405, rpc: -32600, message: 'Method not allowed' },
  bad_request: { http: 400, rpc: -32600, message: 'Bad request' },
  forbidden: { http: 403, rpc: -32600, message: 'Forbidden' },
  shutting_down: { http: 503, rpc: -32099, message: 'Service is shutting down' },
  // The gateway's cap on connections (server.max_connections), or its open files near their limit: refused
  // before any work, the connection closed with the answer.
  too_many_connections: {
    http: 503,
    rpc: -32099,
    message: 'The gateway is at its connection limit (server.max_connections); try again shortly',
  },
  // An endpoint's restrictions (src/fences/): 403, as the key is known and the request is not allowed for it.
  // The message names what was refused (the origin, the address, the method), never the list's entries.
  // JSON-RPC -32600 (the request itself is refused, as `forbidden` is), the method's -32004 as a plan's.
  origin_not_allowed: { http: 403, rpc: -32600, message: 'Origin not allowed for this key' },
  ip_not_allowed: { http: 403, rpc: -32600, message: 'Client address not allowed for this key' },
  method_not_allowed_for_key: { http: 403, rpc: -32004, message: 'Method not allowed for this key' },
  contract_not_allowed: { http: 403, rpc: -32600, message: 'Contract address not allowed for this key' },
  token_refused: { http: 403, rpc: -32600, message: 'Signed token missing or refused' },
  // A suspended owner's keys and management keys: not the 401 of a typo, so the owner knows what to fix.
  // -32001 as `unauthorized`: clients that handle a key problem still read it as one.
  owner_suspended: { http: 403, rpc: -32001, message: 'Owner suspended' },
  // A management key whose role may not do what was asked (a viewer's write, a developer's webhook change).
  role_refused: { http: 403, rpc: -32600, message: 'Not allowed for this key role' },
  // A fleet whose Redis is unreachable, with cluster.redis_failure: closed (the operator chose refusing over local limits).
  limits_unavailable: { http: 503, rpc: -32099, message: 'Rate limits temporarily unavailable' },
} as const;

export type ErrorCode = keyof typeof ERRORS;

/** HTTP status line text for the statuses the gateway writes itself (uWS wants "200 OK", not "200"). */
const STATUS_TEXT: Record<number, string> = {
  200: '200 OK',
  201: '201 Created',
  204: '204 No Content',
  206: '206 Partial Content',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  402: '402 Payment Required',
  403: '403 Forbidden',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  413: '413 Payload Too Large',
  415: '415 Unsupported Media Type',
  429: '429 Too Many Requests',
  500: '500 Internal Server Error',
  502: '502 Bad Gateway',
  503: '503 Service Unavailable',
  504: '504 Gateway Timeout',
};

/** The status line for any status code; unknown codes get a bare number, which HTTP/1.1 allows. */
export function statusLine(status: number): string {
  return STATUS_TEXT[status] ?? `${status} Status`;
}

/** A JSON-RPC error response. `idText` is the request's id exactly as the client wrote it ("null" when absent). */
export function rpcErrorBody(code: ErrorCode, idText: string, message?: string): string {
  const row = ERRORS[code];
  return `{"jsonrpc":"2.0","id":${idText},"error":{"code":${row.rpc},"message":${JSON.stringify(message ?? row.message)}}}`;
}

/**
 * One refusal for every request of a body, as `requestIds` read them: an array of errors, each with its
 * item's id, for a batch; a single error otherwise (id null when the body is not a JSON request).
 */
export function rpcErrorBodyFor(code: ErrorCode, ids: string | readonly string[] | null, message?: string): string {
  if (typeof ids === 'string' || ids === null) return rpcErrorBody(code, ids ?? 'null', message);
  return `[${ids.map((id) => rpcErrorBody(code, id, message)).join(',')}]`;
}

/** A JSON-RPC error with an explicit code, for errors a method rule or the node defines (e.g. -32000). */
export function rpcCustomErrorBody(rpcCode: number, idText: string, message: string): string {
  return `{"jsonrpc":"2.0","id":${idText},"error":{"code":${rpcCode},"message":${JSON.stringify(message)}}}`;
}

/** The Beacon API error shape: `code` equals the HTTP status. */
export function beaconErrorBody(code: ErrorCode, message?: string): string {
  const row = ERRORS[code];
  return `{"code":${row.http},"message":${JSON.stringify(message ?? row.message)}}`;
}

/**
 * The management REST error shape; a refused body's problems, each naming its field, go in `fields`
 * beside the message that joins them (so a form can show each beside its control).
 */
export function managementErrorBody(code: ErrorCode, message?: string, fields?: ReadonlyArray<{ field: string; message: string }>): string {
  const listed = fields === undefined ? '' : `,"fields":${JSON.stringify(fields.map((f) => ({ field: f.field, message: f.message })))}`;
  return `{"error":{"code":${JSON.stringify(code)},"message":${JSON.stringify(message ?? ERRORS[code].message)}${listed}}}`;
}
