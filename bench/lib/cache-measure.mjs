// The cache-dedup section's runs (see bench/README.md, cache-dedup): anvil's chain made ready, a gateway
// measured with wrk on final blocks by hash (its cache filled first when it has one), and the bursts.
import { join } from 'node:path';
import { anvilCall, anvilCallCounter } from './anvil-calls.mjs';
import { addLogBlock, fillCache, fillCalls } from './cache-fill.mjs';
import { startChaingate } from './chaingate.mjs';
import { measureBursts } from './dedup-burst.mjs';
import { measure, notRun } from './measure.mjs';
import { postJson } from './net.mjs';
import { rssKb } from './proc-stats.mjs';

/** The chain's default finality_depth (src/config/defaults.ts): answers about blocks this far below the head are final. */
const FINALITY_DEPTH = 64;
/** The block holding the logs that fill the cache; the fill's ranges start at or before it and end at or after it. */
const LOG_BLOCK = 100;
/** Final blocks beyond those asked for: ranges around LOG_BLOCK end anywhere in them. */
const FINAL_MARGIN = 100;
/** The first dev account of anvil, whose balance is not zero: every identical request asks for it. */
const RICH_ADDRESS = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const CHAIN_ID = 31337;
/** The chain's name in chaingateConfig, part of every cache entry's key. */
const CHAIN_SLUG = 'bench';
const ROUND_FIELDS = ['cpuUsPerRequest', 'upstreamCallsPerRequest'];

const rpc = (rid, method, params) => JSON.stringify({ jsonrpc: '2.0', id: rid, method, params });

/**
 * Mines anvil's chain: LOG_BLOCK holds one transaction's logs, and the head ends FINALITY_DEPTH +
 * FINAL_MARGIN blocks above both it and the last of `hashed` blocks. Resolves `{ blocks, fill }`:
 * blocks 1..hashed as `{ body, result }` (an eth_getBlockByHash request, anvil's answer), and the
 * calls that fill a cache with `fillBytes` (see cache-fill.mjs); `recent`, the same calls for the blocks that are
 * not final yet (asked with and without full transactions), which a cached gateway forwards.
 */
export async function prepareChain({ port, hashed, fillBytes }) {
  const hex = (n) => `0x${n.toString(16)}`;
  await anvilCall(port, 'anvil_mine', [hex(LOG_BLOCK - 1)]);
  const logBlock = await addLogBlock(port, RICH_ADDRESS);
  if (logBlock !== LOG_BLOCK) throw new Error(`the logs went into block ${logBlock}, not ${LOG_BLOCK}`);
  const lastFinal = Math.max(hashed, LOG_BLOCK) + FINAL_MARGIN;
  await anvilCall(port, 'anvil_mine', [hex(lastFinal + FINALITY_DEPTH - LOG_BLOCK)]);
  const byHash = async (n, full) => {
    const { hash } = await anvilCall(port, 'eth_getBlockByNumber', [hex(n), false]);
    return { body: rpc(1, 'eth_getBlockByHash', [hash, full]), result: await anvilCall(port, 'eth_getBlockByHash', [hash, full]) };
  };
  const blocks = [];
  for (let n = 1; n <= hashed; n++) blocks.push(await byHash(n, false));
  // The FINALITY_DEPTH blocks above lastFinal are not final: the same calls of them are forwarded, and
  // asked with and without full transactions, there are twice as many distinct ones.
  const recent = [];
  for (let n = lastFinal + 1; n <= lastFinal + FINALITY_DEPTH; n++) recent.push(await byHash(n, false), await byHash(n, true));
  return { blocks, recent, fill: await fillCalls({ port, chainSlug: CHAIN_SLUG, logBlock, lastFinal, bytes: fillBytes }) };
}

/** What is wrong with the gateway's answers to `blocks` (each must be anvil's result), or null. */
async function wrongBlockAnswer(url, blocks) {
  for (const { body, result } of blocks) {
    let res;
    try {
      res = await postJson(url, body);
    } catch (err) {
      return `no answer: ${err.message}`;
    }
    let answer = null;
    try {
      answer = JSON.parse(res.body);
    } catch {
      // shown below
    }
    if (res.status !== 200 || JSON.stringify(answer?.result) !== JSON.stringify(result))
      return `answer differs from anvil's: HTTP ${res.status} ${res.body.slice(0, 200)}`;
  }
  return null;
}

/**
 * One gateway measured with wrk on `blocks` in turn. Every block is asked once first and compared with
 * anvil's answer, which also puts it in the cache, so that a cached gateway's measured window holds
 * hits only; `fill` (`{ calls, bytes }` from fillCalls, for a cached gateway) is then put in its cache.
 */
export async function measureGateway({ id, label, extraYaml, anvil, counter, blocks, fill, ctx }) {
  let gateway;
  try {
    gateway = await startChaingate({
      name: `chaingate-${id}`,
      dir: join(ctx.tmpdir, id),
      upstreamPort: anvil.port,
      chainId: CHAIN_ID,
      core: ctx.settings.serverCore,
      extraYaml,
    });
  } catch (err) {
    return notRun({ id, label, reason: `did not start: ${err.message}`, error: true });
  }
  try {
    const before = await wrongBlockAnswer(gateway.url, blocks);
    if (before) return notRun({ id, label, reason: `before the run: ${before}`, error: true });
    const filled = {};
    if (fill) {
      ctx.log(`${label}: filling the cache with ${(fill.bytes / 1_048_576).toFixed(1)} MB (${fill.calls.length} eth_getLogs answers)`);
      filled.rssBeforeFillMb = rssKb(gateway.pid) / 1024;
      try {
        await fillCache({ url: gateway.url, calls: fill.calls, countCalls: anvilCallCounter(anvil.proc.logPath, 'eth_getLogs').count });
      } catch (err) {
        return notRun({ id, label, reason: `filling the cache: ${err.message}`, error: true });
      }
      filled.rssAfterFillMb = rssKb(gateway.pid) / 1024;
      filled.cacheFilledMb = fill.bytes / 1_048_576;
      filled.cacheFillEntries = fill.calls.length;
    }
    const run = await measure({
      id,
      label,
      url: gateway.url,
      pid: gateway.pid,
      upstreamPid: anvil.pid,
      countUpstreamCalls: counter.count,
      ctx,
    });
    const after = await wrongBlockAnswer(gateway.url, blocks.slice(0, 1));
    if (after) run.errors.push(`after the run: ${after}`);
    return Object.assign(run, filled, { rankBy: 'cpuUsPerRequest', roundFields: ROUND_FIELDS });
  } finally {
    await gateway.stop();
  }
}

/** Both bursts through one gateway (cache on: `latest` is never cached), identical reads first. */
export async function measureBurstPair({ rows, anvil, burst, cacheMaxBytes, ctx }) {
  const { size, bursts } = burst;
  const identical = Array.from({ length: size }, (_, i) => rpc(i + 1, 'eth_getBalance', [RICH_ADDRESS, 'latest']));
  const addresses = Array.from({ length: size }, (_, i) => `0x${(i + 1).toString(16).padStart(40, '0')}`);
  const distinct = addresses.map((a, i) => rpc(i + 1, 'eth_getBalance', [a, 'latest']));
  const cannotRun = (reason) => rows.map(([id, label]) => notRun({ id, label, reason, error: true }));
  // The answers every burst must get, from anvil directly (before any call is counted).
  let richBalance;
  const balances = [];
  try {
    richBalance = await anvilCall(anvil.port, 'eth_getBalance', [RICH_ADDRESS, 'latest']);
    for (const a of addresses) balances.push(await anvilCall(anvil.port, 'eth_getBalance', [a, 'latest']));
  } catch (err) {
    return cannotRun(`asking anvil: ${err.message}`);
  }

  let gateway;
  try {
    gateway = await startChaingate({
      name: 'chaingate-bursts',
      dir: join(ctx.tmpdir, 'bursts'),
      upstreamPort: anvil.port,
      chainId: CHAIN_ID,
      core: ctx.settings.serverCore,
      // Metrics on a port of their own, as the wrk rows': 9464 may be another bench's on a shared machine.
      extraYaml: `cache: { max_bytes: ${cacheMaxBytes} }\nmetrics: { port: 0 }\n`,
    });
  } catch (err) {
    return cannotRun(`did not start: ${err.message}`);
  }
  const counter = anvilCallCounter(anvil.proc.logPath, 'eth_getBalance');
  const common = { url: gateway.url, pid: gateway.pid, upstreamPid: anvil.pid, bursts, countCalls: counter.count, ctx };
  try {
    return [
      await measureBursts({ ...common, id: rows[0][0], label: rows[0][1], bodies: identical, expected: identical.map(() => richBalance) }),
      await measureBursts({ ...common, id: rows[1][0], label: rows[1][1], bodies: distinct, expected: balances }),
    ];
  } finally {
    await gateway.stop();
  }
}
