/** How many ids the gateway gives its upstream calls in turn (a power of two). */
export const GATEWAY_IDS = 1024;

/**
 * The ids' text, made once. Text made from a new number on every call would be kept by V8's
 * number-to-string cache, an old-generation table where each text stays until a later number takes its
 * slot: under load every call's id text outlived two young-generation collections and was promoted, about
 * 1.5 MB/s of old-generation garbage at 60,000 calls/s, and the daemon's RSS grew ~15 MB in a 10 s run
 * (bench/history/2026-11-26.md).
 */
const gatewayIdTexts: readonly string[] = Array.from({ length: GATEWAY_IDS }, (_, i) => String(i + 1));
let nextGatewayId = 0;

/**
 * The gateway's own id for an upstream JSON-RPC call, 1 to GATEWAY_IDS in turn, shared by the clients'
 * forwarded calls and the gateway's own. Clients' ids never reach a node: a 30-digit id or an odd string
 * cannot confuse it, and the client gets back exactly the text it sent. Calls made close together carry
 * different ids, so an answer that comes back on another call (a node or balancer mixing up pipelined
 * answers) shows it: every answer is checked to carry its call's id (pipeline/forward.ts, rpc-call.ts).
 */
export function gatewayIdText(): string {
  const text = gatewayIdTexts[nextGatewayId]!;
  nextGatewayId = (nextGatewayId + 1) & (GATEWAY_IDS - 1);
  return text;
}

/**
 * Whether a parsed JSON-RPC answer carries `sentId` (a gatewayIdText()): an answer with another id, or none, is
 * another call's. JSON.parse keeps the last of two ids, so a second one that differs is seen too.
 */
export function carriesId(answer: unknown, sentId: string): boolean {
  const id = (answer as { id?: unknown } | null)?.id;
  return typeof id === 'number' && String(id) === sentId;
}
