import { join } from 'node:path';
import { startChaingate } from './chaingate.mjs';
import { measure, notRun } from './measure.mjs';
import { cpuProfArgs, stopGraceMs } from './profiles.mjs';
import { FIXED_UPSTREAM_CHAIN_ID } from './upstreams.mjs';

/**
 * One row of a section that puts a gateway in front of fixed upstreams and measures the section's load through
 * it (ctx.body and ctx.script): the build `main` (this tree's when absent; BENCH_BASELINE's `main` for its rows)
 * with `server.workers: workers`, on the server core, metrics on (on a port of their own: 9464 may be another
 * bench's on a shared machine), in front of `upstream` (or of each of `upstreams`, the first one's CPU kept out of
 * the box-load figure as a node's, the others' as services), with the chain's keys `chainYaml`. Stopped after.
 * `name` names the process and its log (lib/processes.mjs). `keyed`: the load goes to an endpoint's key, so every call is looked up, limited and metered (see startChaingate).
 * `extraYaml` is appended to the config after the metrics section. `roundFields` are kept for each round
 * (lib/rounds.mjs). Never throws: a gateway that does not start is a row with an error.
 */
export async function measureGatewayRow({
  id,
  name = id,
  label,
  main,
  workers = 1,
  upstream,
  upstreams,
  keyed = false,
  extraYaml = '',
  chainYaml,
  roundFields,
  ctx,
}) {
  const nodes = upstreams ?? [upstream];
  let server;
  try {
    server = await startChaingate({
      name,
      dir: join(ctx.tmpdir, id),
      ...(upstreams ? { upstreamPorts: upstreams.map((u) => u.port) } : { upstreamPort: upstream.port }),
      chainId: FIXED_UPSTREAM_CHAIN_ID,
      core: ctx.settings.serverCore,
      workers,
      main,
      keyed,
      extraYaml: `metrics: { port: 0 }\n${extraYaml}`,
      chainYaml,
      nodeArgs: cpuProfArgs(ctx, id),
    });
  } catch (err) {
    return notRun({ id, label, reason: `did not start: ${err.message}`, error: true });
  }
  try {
    const url = server.url ?? `http://127.0.0.1:${server.port}/`;
    const servicePids = nodes.slice(1).map((u) => u.pid);
    const run = await measure({ id, label, url, pid: server.pid, upstreamPid: nodes[0].pid, servicePids, ctx });
    return { ...run, roundFields };
  } finally {
    await server.stop(stopGraceMs(ctx));
  }
}
