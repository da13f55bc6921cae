/**
 * How a call asked of several nodes (quorum-call.ts) fails when its nodes did not fail: the reasons the sink is
 * told, and what the client is answered for each (the no_quorum row of errors.ts, with a message saying what was
 * missing). The reason's text is what travels (through shared calls too), as upstream-failures.ts tells its own.
 */

/** Bytes of one node's answer past which it is not compared: N nodes' answers are held at once, per call. */
export const QUORUM_ANSWER_BYTES = 1_048_576;

/** What the log names as the upstream of a call the quorum refused (no single node is to blame). */
export const QUORUM_LABEL = 'quorum';

/** The reasons a call asked of several nodes fails without a node failure; each reaches the client as no_quorum. */
export const DISAGREED = 'nodes disagreed on the answer';
export const TOO_FEW_NODES = 'fewer nodes in rotation than consistency.quorum.agree';
export const TOO_FEW_ANSWERS = 'fewer nodes answered than consistency.quorum.agree';
export const TOO_LARGE = `an answer is larger than the ${QUORUM_ANSWER_BYTES} bytes a quorum compares`;

/** Each quorum failure's reason, and the message its client gets (undefined: the no_quorum row's own). */
const CLIENT_MESSAGES = new Map<string, string | undefined>([
  [DISAGREED, undefined],
  [TOO_FEW_NODES, 'Too few nodes in rotation to agree on the answer'],
  [TOO_FEW_ANSWERS, 'Too few nodes answered to agree on the answer'],
  [TOO_LARGE, `The answer is larger than the ${QUORUM_ANSWER_BYTES} bytes nodes' answers are compared up to; ask for less`],
]);

/**
 * Whether a failed call's `reason` is the quorum's (then the client gets no_quorum with the message returned,
 * undefined meaning the row's own), or null for any other failure. Told by the reason's text, which survives
 * shared calls (shared-call.ts), as upstream-failures.ts tells WRONG_ID_REASON.
 */
export function quorumFailure(reason: string): { message: string | undefined } | null {
  return CLIENT_MESSAGES.has(reason) ? { message: CLIENT_MESSAGES.get(reason) } : null;
}
