/** One allowed Beacon API operation: `template` names its path parameters in braces. */
export interface BeaconRoute {
  method: 'GET' | 'POST';
  template: string;
}

/** The verdict on one Beacon request line: forward it under `template`, or refuse with this status. */
export type BeaconMatch =
  | { ok: true; template: string; events: boolean }
  | { ok: false; status: 400 | 404 | 405; message: string; allow?: string };

const get = (template: string): BeaconRoute => ({ method: 'GET', template });
const post = (template: string): BeaconRoute => ({ method: 'POST', template });
const getPost = (template: string): BeaconRoute[] => [get(template), post(template)];

export const EVENTS_TEMPLATE = '/eth/v1/events';

/** Every operation the gateway forwards; anything else is answered by the gateway and never reaches a node. */
export const BEACON_ROUTES: readonly BeaconRoute[] = Object.freeze(
  [
    // Node: the spec's node table.
    get('/eth/v1/node/version'),
    get('/eth/v1/node/syncing'),
    get('/eth/v1/node/health'),
    get('/eth/v1/node/identity'),
    get('/eth/v1/node/peers'),
    get('/eth/v1/node/peer_count'),
    // Beacon blocks: the spec's blocks table.
    get('/eth/v1/beacon/genesis'),
    get('/eth/v1/beacon/headers'),
    get('/eth/v1/beacon/headers/{block_id}'),
    get('/eth/v2/beacon/blocks/{block_id}'),
    get('/eth/v1/beacon/blocks/{block_id}/root'),
    get('/eth/v1/beacon/blocks/{block_id}/attestations'),
    get('/eth/v1/beacon/blob_sidecars/{block_id}'),
    get('/eth/v1/beacon/deposit_snapshot'),
    // Beacon blocks: the current Beacon API's successors (attestations v2 since Electra, blobs since Fulu).
    get('/eth/v2/beacon/blocks/{block_id}/attestations'),
    get('/eth/v1/beacon/blobs/{block_id}'),
    // Beacon states: the spec's states table, plus the POST forms the current Beacon API defines for long id lists.
    get('/eth/v1/beacon/states/{state_id}/root'),
    get('/eth/v1/beacon/states/{state_id}/fork'),
    get('/eth/v1/beacon/states/{state_id}/finality_checkpoints'),
    ...getPost('/eth/v1/beacon/states/{state_id}/validators'),
    get('/eth/v1/beacon/states/{state_id}/validators/{validator_id}'),
    ...getPost('/eth/v1/beacon/states/{state_id}/validator_balances'),
    get('/eth/v1/beacon/states/{state_id}/committees'),
    get('/eth/v1/beacon/states/{state_id}/sync_committees'),
    get('/eth/v1/beacon/states/{state_id}/randao'),
    // Config: the spec's config table.
    get('/eth/v1/config/spec'),
    get('/eth/v1/config/fork_schedule'),
    get('/eth/v1/config/deposit_contract'),
    // Validator: the spec's validator table, which lists attester duties by GET (the older Beacon API's form, indices in
    // `?index=`), plus the POST form the current Beacon API serves them by (indices in the body).
    ...getPost('/eth/v1/validator/duties/attester/{epoch}'),
    get('/eth/v1/validator/duties/proposer/{epoch}'),
    post('/eth/v1/validator/duties/sync/{epoch}'),
    get('/eth/v1/validator/attestation_data'),
    get('/eth/v1/validator/aggregate_attestation'),
    get('/eth/v1/validator/sync_committee_contribution'),
    get('/eth/v3/validator/blocks/{slot}'),
    // Validator: the current Beacon API's successor of aggregate_attestation (Electra).
    get('/eth/v2/validator/aggregate_attestation'),
    // Pool: the spec's pool table, plus the submissions the Beacon API defines on the same paths (sync_committees is submit-only upstream).
    ...getPost('/eth/v1/beacon/pool/attestations'),
    ...getPost('/eth/v1/beacon/pool/attester_slashings'),
    ...getPost('/eth/v1/beacon/pool/proposer_slashings'),
    ...getPost('/eth/v1/beacon/pool/voluntary_exits'),
    ...getPost('/eth/v1/beacon/pool/sync_committees'),
    ...getPost('/eth/v1/beacon/pool/bls_to_execution_changes'),
    // Pool: the current Beacon API's successors of the attestation and attester slashing pools (Electra).
    ...getPost('/eth/v2/beacon/pool/attestations'),
    ...getPost('/eth/v2/beacon/pool/attester_slashings'),
    // Debug: the spec's debug table.
    get('/eth/v2/debug/beacon/states/{state_id}'),
    get('/eth/v2/debug/beacon/heads'),
    get('/eth/v1/debug/fork_choice'),
    // Events: the spec's events table (the SSE stream).
    get(EVENTS_TEMPLATE),
  ].map((route) => Object.freeze(route)),
);

type ParamName = 'state_id' | 'block_id' | 'validator_id' | 'epoch' | 'slot';

/** Longest path echoed in a message, so a refusal never grows with what the client sent. */
const MAX_ECHO = 160;

/** Client text as it may appear in a message: cut short, control and non-ASCII characters escaped so logs stay one line. */
function echo(s: string): string {
  const cut = s.length > MAX_ECHO ? `${s.slice(0, MAX_ECHO)}...` : s;
  return cut.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

const UINT64_MAX = '18446744073709551615';

/** Decimal without sign or leading zeros, at most 2^64-1: the Beacon API's Uint64 as it appears in a path. */
function isUint64(s: string): boolean {
  const n = s.length;
  if (n === 0 || n > UINT64_MAX.length) return false;
  if (n > 1 && s.charCodeAt(0) === 48) return false;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return n < UINT64_MAX.length || s <= UINT64_MAX;
}

/** `0x` followed by exactly `bytes` bytes of hex, either case. */
function isHexBytes(s: string, bytes: number): boolean {
  if (s.length !== 2 + 2 * bytes || s.charCodeAt(0) !== 48 || s.charCodeAt(1) !== 120) return false;
  for (let i = 2; i < s.length; i++) {
    const c = s.charCodeAt(i) | 0x20;
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

const STATE_WORDS: ReadonlySet<string> = new Set(['head', 'genesis', 'finalized', 'justified']);
const BLOCK_WORDS: ReadonlySet<string> = new Set(['head', 'genesis', 'finalized']);

interface ParamRule {
  accepts: (value: string) => boolean;
  expected: string;
}

const PARAM_RULES: Readonly<Record<ParamName, ParamRule>> = {
  state_id: {
    accepts: (v) => STATE_WORDS.has(v) || isUint64(v) || isHexBytes(v, 32),
    expected: 'head, genesis, finalized, justified, a slot number or a 0x-prefixed 32-byte root',
  },
  block_id: {
    accepts: (v) => BLOCK_WORDS.has(v) || isUint64(v) || isHexBytes(v, 32),
    expected: 'head, genesis, finalized, a slot number or a 0x-prefixed 32-byte root',
  },
  validator_id: {
    accepts: (v) => isUint64(v) || isHexBytes(v, 48),
    expected: 'a validator index or a 0x-prefixed 48-byte public key',
  },
  epoch: { accepts: isUint64, expected: 'an epoch number (decimal, no sign or leading zeros, below 2^64)' },
  slot: { accepts: isUint64, expected: 'a slot number (decimal, no sign or leading zeros, below 2^64)' },
};

/** The end of one template: which methods it takes and the Allow header that lists them. */
interface Leaf {
  template: string;
  get: boolean;
  post: boolean;
  allow: string;
  events: boolean;
}

/** One segment position: literal children first, then at most one parameter child. */
interface TrieNode {
  literals: Map<string, TrieNode>;
  param: { name: ParamName; node: TrieNode } | undefined;
  leaf: Leaf | undefined;
}

const newNode = (): TrieNode => ({ literals: new Map(), param: undefined, leaf: undefined });

function buildTrie(routes: readonly BeaconRoute[]): TrieNode {
  const root = newNode();
  for (const { method, template } of routes) {
    let node = root;
    for (const segment of template.slice(1).split('/')) {
      if (segment.startsWith('{')) {
        const name = segment.slice(1, -1);
        if (!Object.hasOwn(PARAM_RULES, name)) throw new Error(`beacon route ${template}: no rule for parameter ${name}`);
        if (node.param !== undefined && node.param.name !== name) {
          throw new Error(`beacon route ${template}: parameter ${name} clashes with ${node.param.name}`);
        }
        node.param ??= { name: name as ParamName, node: newNode() };
        node = node.param.node;
      } else {
        let next = node.literals.get(segment);
        if (next === undefined) node.literals.set(segment, (next = newNode()));
        node = next;
      }
    }
    const leaf = (node.leaf ??= { template, get: false, post: false, allow: '', events: template === EVENTS_TEMPLATE });
    if (method === 'GET') leaf.get = true;
    else leaf.post = true;
    leaf.allow = leaf.get && leaf.post ? 'GET, POST' : leaf.get ? 'GET' : 'POST';
  }
  return root;
}

const TRIE = buildTrie(BEACON_ROUTES);

/** Walks `segments` from `index`; fills `params` (name, value pairs) along the way and returns the leaf reached. */
function walk(node: TrieNode, segments: readonly string[], index: number, params: string[]): Leaf | undefined {
  if (index === segments.length) return node.leaf;
  const segment = segments[index] as string;
  const literal = node.literals.get(segment);
  if (literal !== undefined) {
    const leaf = walk(literal, segments, index + 1, params);
    if (leaf !== undefined) return leaf;
  }
  if (node.param === undefined) return undefined;
  const mark = params.length;
  params.push(node.param.name, segment);
  const leaf = walk(node.param.node, segments, index + 1, params);
  if (leaf === undefined) params.length = mark;
  return leaf;
}

function isSegmentChar(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c === 45 || c === 46;
}

/**
 * Splits `path` from index `from` into segments, or says why it may not be forwarded. No Beacon path needs percent-encoding,
 * an empty segment or a dot segment, so refusing them here keeps traversal from ever reaching a node.
 */
function splitPath(path: string, from: number): string[] | string {
  const segments: string[] = [];
  let start = from;
  for (let i = from; i <= path.length; i++) {
    const c = i < path.length ? path.charCodeAt(i) : 47;
    if (c === 47) {
      const segment = path.slice(start, i);
      if (segment === '') return 'empty path segment';
      if (segment === '.' || segment === '..') return `'${segment}' path segment`;
      segments.push(segment);
      start = i + 1;
    } else if (c === 37) {
      return 'percent-encoding';
    } else if (!isSegmentChar(c)) {
      return 'characters outside A-Z, a-z, 0-9, _, - and .';
    }
  }
  return segments;
}

/**
 * Decides whether `method` on the Beacon `path` (query string removed) may be forwarded: 400 for a malformed path,
 * 404 when no route has its shape, 405 when the route exists under another method, 400 for a bad path parameter.
 */
export function matchBeaconPath(method: string, path: string): BeaconMatch {
  const absolute = path.charCodeAt(0) === 47;
  const segments = path.length === 0 ? [] : splitPath(path, absolute ? 1 : 0);
  if (typeof segments === 'string') {
    return { ok: false, status: 400, message: `Invalid Beacon API path '${echo(path)}': ${segments}` };
  }
  if (!absolute) return { ok: false, status: 404, message: `No Beacon API path '${echo(path)}'` };
  const params: string[] = [];
  const leaf = walk(TRIE, segments, 0, params);
  if (leaf === undefined) return { ok: false, status: 404, message: `No Beacon API path '${echo(path)}'` };
  if (!(method === 'GET' ? leaf.get : method === 'POST' && leaf.post)) {
    return { ok: false, status: 405, message: `${echo(method)} is not allowed on ${leaf.template}; use ${leaf.allow}`, allow: leaf.allow };
  }
  for (let i = 0; i < params.length; i += 2) {
    const name = params[i] as ParamName;
    const value = params[i + 1] as string;
    const rule = PARAM_RULES[name];
    if (!rule.accepts(value)) {
      return { ok: false, status: 400, message: `Invalid ${name} '${echo(value)}': expected ${rule.expected}` };
    }
  }
  return { ok: true, template: leaf.template, events: leaf.events };
}
