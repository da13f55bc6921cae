import type { Logger } from '../log.js';
import type { ChainRuntime } from './runtime.js';

/**
 * One look at every upstream at start, so the log says at once which nodes answer. Nothing waits on it: the
 * gateway serves (502 for a dead node) whatever it finds. A node on another chain is not said to be ok here:
 * the identity check (chain/chain-identity.ts) logs it as it takes it out of rotation.
 */
export function probeUpstreams(chains: Iterable<ChainRuntime>, log: Logger): Promise<void> {
  const probes: Array<Promise<void>> = [];
  for (const chain of chains) {
    const { slug, kind, chain_id: chainId } = chain.config;
    chain.upstreams.forEach((upstream, i) => {
      // Logged by its configured name, never its URL.
      const name = chain.config.upstreams[i]!.name;
      probes.push(
        new Promise<void>((resolve) => {
          const chunks: Buffer[] = [];
          let status = 0;
          upstream.request(
            kind === 'evm'
              ? {
                  method: 'POST',
                  headers: [['content-type', 'application/json']],
                  body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
                  timeoutMs: 5000,
                }
              : { method: 'GET', path: '/eth/v1/node/version', headers: [['accept', 'application/json']], timeoutMs: 5000 },
            {
              onHead(s) {
                status = s;
              },
              onData(chunk) {
                chunks.push(chunk);
                return true;
              },
              onEnd() {
                const fields = { chain: slug, upstream: name, status };
                if (status < 200 || status > 299) {
                  log.warn('upstream answers with an error; calls get 502 until it recovers', fields);
                } else if (kind === 'evm') {
                  const result = parseResult(Buffer.concat(chunks).toString());
                  // A node on another chain is logged by the identity check, as it takes it out of rotation.
                  if (result === undefined || Number(result) === chainId) log.info('upstream ok', fields);
                } else {
                  log.info('upstream ok', fields);
                }
                resolve();
              },
              onError(err) {
                log.warn('upstream unreachable; calls get 502 until it is back', {
                  chain: slug,
                  upstream: name,
                  reason: err.kind,
                });
                resolve();
              },
            },
          );
        }),
      );
    });
  }
  return Promise.all(probes).then(() => undefined);
}

function parseResult(text: string): string | undefined {
  try {
    const v = JSON.parse(text) as { result?: unknown };
    return typeof v.result === 'string' ? v.result : undefined;
  } catch {
    return undefined;
  }
}
