import t from 'tap';
import { ERRORS } from '../../src/errors.js';
import { callFailure, NODE_ERROR_MESSAGE } from '../../src/pipeline/call-failure.js';

t.test("a failure keeps the error table's row, or a node's own code, never free text", async (t) => {
  t.same(callFailure(502, 502, 'no_quorum', 'node-a'), {
    httpStatus: 502,
    code: ERRORS.no_quorum.rpc,
    error: 'no_quorum',
    message: ERRORS.no_quorum.message,
    upstream: 'node-a',
  });
  t.same(callFailure(429, 429, 'rate_limited'), {
    httpStatus: 429,
    code: -32005,
    error: 'rate_limited',
    message: ERRORS.rate_limited.message,
    upstream: null,
  });
  t.same(
    callFailure(200, -32000, null),
    { httpStatus: 200, code: -32000, error: null, message: NODE_ERROR_MESSAGE, upstream: null },
    "a node's JSON-RPC error: its code, a fixed message",
  );
  t.same(callFailure(418, 418, null), { httpStatus: 418, code: null, error: null, message: 'Failed with HTTP 418', upstream: null });
  t.same(
    callFailure(503, 503, null),
    { httpStatus: 503, code: null, error: null, message: 'Failed with HTTP 503', upstream: null },
    "a node's own 503 passed on is no row of the table (not upstream_budget)",
  );
});
