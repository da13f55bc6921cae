/** Event topics a client may ask of the Beacon SSE stream (`GET /eth/v1/events?topics=...`). */
export const BEACON_TOPICS: ReadonlySet<string> = new Set([
  'head',
  'block',
  'block_gossip',
  'attestation',
  'single_attestation',
  'voluntary_exit',
  'bls_to_execution_change',
  'proposer_slashing',
  'attester_slashing',
  'finalized_checkpoint',
  'chain_reorg',
  'contribution_and_proof',
  'light_client_finality_update',
  'light_client_optimistic_update',
  'payload_attributes',
  'blob_sidecar',
  'data_column_sidecar',
]);

const KNOWN = [...BEACON_TOPICS].join(', ');

/** Longest client text echoed in a message, so a refusal never grows with what the client sent. */
const MAX_ECHO = 80;

function decodeComponent(raw: string): string | undefined {
  if (!raw.includes('%') && !raw.includes('+')) return raw;
  try {
    return decodeURIComponent(raw.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}

/**
 * Reads the topics of an events request from its raw query string (no `?`). Takes both `topics=a,b` and repeated
 * `topics=a&topics=b`, keeps the first occurrence of each, and matches names exactly: ` head` is not `head`.
 * Other query parameters are none of its business.
 */
export function parseTopics(query: string): { ok: true; topics: string[] } | { ok: false; message: string } {
  const seen = new Set<string>();
  for (const pair of query.split('&')) {
    const eq = pair.indexOf('=');
    const key = decodeComponent(eq === -1 ? pair : pair.slice(0, eq));
    if (key !== 'topics') continue;
    const value = eq === -1 ? '' : decodeComponent(pair.slice(eq + 1));
    if (value === undefined) return { ok: false, message: 'topics is not valid percent-encoding' };
    for (const topic of value.split(',')) {
      if (topic === '') continue;
      if (!BEACON_TOPICS.has(topic)) {
        const shown = topic.length > MAX_ECHO ? `${topic.slice(0, MAX_ECHO)}...` : topic;
        return { ok: false, message: `Invalid topic '${shown}': expected one of ${KNOWN}` };
      }
      seen.add(topic);
    }
  }
  if (seen.size === 0) return { ok: false, message: `topics is required: one or more of ${KNOWN}, comma-separated or repeated` };
  return { ok: true, topics: [...seen] };
}
