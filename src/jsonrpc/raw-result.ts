/**
 * The bytes of a JSON-RPC answer's top-level `result` member, found by one pass over the bytes instead
 * of JSON.parse: a large answer (a wide eth_getLogs) parsed only to be written back costs its size
 * several times over in short-lived objects, which is what grows a busy process's heap.
 *
 * The body must be valid JSON (the caller has checked it). The members are walked as accepted-answer.ts
 * walks them, so a `"result"` inside a value is never taken for the member.
 */
import { acceptedValueEnd, forEachTopMember } from './accepted-answer.js';

const RESULT_KEY = Buffer.from('"result"');
const ERROR_KEY = Buffer.from('"error"');

/**
 * The `result` value's bytes (a view into `body`), or null when the answer is not an object, has an
 * `error` member, or has no `result`.
 */
export function rawResult(body: Buffer): Buffer | null {
  let valueStart = -1;
  let failed = false;
  const walked = forEachTopMember(body, (nameStart, nameEnd, start) => {
    const name = body.subarray(nameStart, nameEnd);
    if (name.equals(ERROR_KEY)) {
      failed = true;
      return false;
    }
    if (name.equals(RESULT_KEY)) valueStart = start;
    return true;
  });
  if (!walked || failed || valueStart < 0) return null;
  const end = acceptedValueEnd(body, valueStart);
  return end < 0 ? null : body.subarray(valueStart, end);
}
