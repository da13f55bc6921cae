/**
 * `chaingate status --config FILE`: asks the running daemon, through its metrics listener (the host, port
 * and token of the config's `metrics` section), for GET /status and prints it per chain. Exit 0 when every
 * chain has a node in rotation, 1 when one has none, 2 when the daemon cannot be asked.
 */
import type { Config } from '../config/schema.js';
import type { FleetStatus, StatusReport } from '../server/status-report.js';
import { escapeCell, formatTable, formatTime } from './table.js';

/** How long the daemon gets to answer, in ms: a daemon that holds a scrape this long is as good as down. */
const ASK_TIMEOUT_MS = 5_000;

export const STATUS_EXIT = { ready: 0, notReady: 1, unreachable: 2 } as const;

/** ", safe N, finalized M" when the chain knows them (a beacon chain never does; an older daemon sends neither). */
function finalityText(c: StatusReport['chains'][string]): string {
  if (c.safe_block == null && c.finalized_block == null) return '';
  return `, safe ${c.safe_block ?? '–'}, finalized ${c.finalized_block ?? '–'}`;
}

/** The report as the operator reads it: one block per chain, its upstreams as a table. */
export function formatStatus(r: StatusReport): string {
  const out: string[] = [`chaingate up ${r.uptime_s} s`];
  for (const [slug, c] of Object.entries(r.chains)) {
    out.push(
      '',
      `${slug}: ${c.ready ? 'ready' : 'NOT READY (no node in rotation)'}, head ${c.best_head ?? '–'}, ` +
        `served ${c.served_head ?? '–'}${finalityText(c)}, ` +
        `${c.requests_per_s_1m.toFixed(1)} req/s over the last minute, ${c.ws_connections} WebSockets, ` +
        `${c.subscriptions} subscriptions, ${c.event_streams} event streams`,
    );
    const rows = c.upstreams.map((u) => [
      u.name,
      (u.in_rotation
        ? 'in rotation'
        : `out (${u.reason === 'wrong_chain' ? `serves ${u.serves ?? 'another chain'}` : (u.reason ?? 'unknown')})`) +
        (u.archive === undefined ? '' : `, archive: ${u.archive}, methods: ${u.methods}`),
      u.head === null ? '–' : String(u.head),
      u.lag === null ? '–' : String(u.lag),
    ]);
    out.push(...indented(formatTable(['upstream', 'state', 'head', 'lag'], rows)));
  }
  const l = r.ledger;
  out.push(
    '',
    `ledger: last flush ${l.last_flush_at ?? 'not yet'}${l.last_flush_ok === false ? ' FAILED' : ''}, ${l.flush_failures} failed flushes since start`,
  );
  if (r.workers !== undefined) {
    const { count, unanswered } = r.workers;
    out.push(
      '',
      unanswered.length === 0
        ? `workers: ${count}, every one answered`
        : `workers: ${count}; worker ${unanswered.join(', ')} did not answer in time (stalled?): their connections and requests are missing above`,
    );
  }
  if (r.fleet !== undefined) out.push('', ...formatFleet(r.fleet));
  return out.join('\n') + '\n';
}

/** The fleet's instances as a table, this daemon marked `*`; or why the shared store could not list them. */
export function formatFleet(f: FleetStatus): string[] {
  if (f.error !== null) return [`fleet: this instance ${f.this_instance}; the instances could not be read: ${escapeCell(f.error)}`];
  const rows = f.instances.map((i) => [
    i.id === f.this_instance ? `${i.id} *` : i.id,
    formatTime(Math.floor(Date.parse(i.started_at) / 1000)),
    formatTime(Math.floor(Date.parse(i.last_heartbeat_at) / 1000)),
    `${i.heartbeat_age_s} s ago`,
    Object.entries(i.info)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' '),
  ]);
  const n = f.instances.length;
  return [
    `fleet: ${n} instance${n === 1 ? '' : 's'} (* this one, ${f.this_instance})`,
    ...indented(formatTable(['instance', 'started', 'last heartbeat', 'age', 'info'], rows)),
  ];
}

/** A table's lines, indented under the line that names it. */
function indented(table: string): string[] {
  return table
    .trimEnd()
    .split('\n')
    .map((l) => `  ${l}`);
}

/** The URL of `path` on the daemon's metrics listener (a wildcard host is asked on loopback). */
export function daemonUrl(m: NonNullable<Config['metrics']>, path: string): string {
  const host = m.host === '0.0.0.0' ? '127.0.0.1' : m.host === '::' ? '::1' : m.host;
  return `http://${host.includes(':') ? `[${host}]` : host}:${m.port}${path}`;
}

/** Runs the command; resolves with its exit code after writing to `out` / `err` (`json`: the report as the daemon sent it). */
export async function runStatus(
  config: Config,
  configPath: string,
  out: (s: string) => void,
  err: (s: string) => void,
  json = false,
): Promise<number> {
  const m = config.metrics;
  if (m === undefined) {
    err(`chaingate status: ${configPath} turns the metrics listener off (metrics.enabled: false), and status asks the daemon through it\n`);
    return STATUS_EXIT.unreachable;
  }
  const url = daemonUrl(m, '/status');
  let report: StatusReport;
  try {
    const res = await fetch(url, {
      signal: AbortSignal.timeout(ASK_TIMEOUT_MS),
      ...(m.token !== undefined ? { headers: { authorization: `Bearer ${m.token}` } } : {}),
    });
    if (res.status !== 200) {
      err(`chaingate status: the daemon at ${url} answered ${res.status}: ${(await res.text()).trim()}\n`);
      return STATUS_EXIT.unreachable;
    }
    report = (await res.json()) as StatusReport;
  } catch (e) {
    const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name;
    err(`chaingate status: cannot reach the daemon at ${url} (${cause}): is chaingate running with ${configPath}?\n`);
    return STATUS_EXIT.unreachable;
  }
  out(json ? `${JSON.stringify(report)}\n` : formatStatus(report));
  return Object.values(report.chains).every((c) => c.ready) ? STATUS_EXIT.ready : STATUS_EXIT.notReady;
}
