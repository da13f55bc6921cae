/**
 * What two nodes' answers to one call are compared by (consistency.quorum, pipeline/quorum-call.ts): the
 * answer's `result` as canonical JSON (object keys sorted at every depth, no spaces), or its error object's code
 * and message. The envelope (`jsonrpc`, `id`) and an error's `data` are left out: the id is the gateway's own per
 * node, and `data` differs between client implementations where the error does not.
 *
 * Numbers are compared as JavaScript reads them: nodes write quantities as hex strings, so a number past 2^53
 * (which two answers could differ in beyond a double's precision) does not occur in the answers compared.
 */

/** The comparison key of a whole JSON-RPC answer, or null when it is not one (no `result`, no `error`). */
export function answerKey(body: Buffer): string | null {
  let answer: unknown;
  try {
    answer = JSON.parse(body.toString());
  } catch {
    return null;
  }
  if (answer === null || typeof answer !== 'object' || Array.isArray(answer)) return null;
  const { result, error } = answer as { result?: unknown; error?: unknown };
  if (error !== undefined && error !== null) {
    const e = error as { code?: unknown; message?: unknown };
    return typeof error === 'object' ? `e${canonicalJson([e.code ?? null, e.message ?? null])}` : `e${canonicalJson(error)}`;
  }
  return result === undefined ? null : `r${canonicalJson(result)}`;
}

/** `value` as JSON with every object's keys in sorted order, so equal values give equal text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const object = value as Record<string, unknown>;
  const keys = Object.keys(object).sort();
  let out = '{';
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (i > 0) out += ',';
    out += JSON.stringify(key) + ':' + canonicalJson(object[key]);
  }
  return out + '}';
}
