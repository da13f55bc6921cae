/** Text and Markdown renderings of a bench result; numbers are rounded here only, JSON keeps them whole. */

const fmt = {
  rps: (v) => (v == null ? '–' : Math.round(v).toLocaleString('en-US')),
  ms: (v) => (v == null ? '–' : v < 10 ? v.toFixed(2) : v.toFixed(1)),
  us: (v) => (v == null ? '–' : v.toFixed(1)),
  mb: (v) => (v == null ? '–' : v.toFixed(1)),
  ratio: (v) => (v == null ? '–' : v.toFixed(2)),
};

function runNote(run) {
  if (run.skipped) return `skipped: ${run.skipped}`;
  const notes = run.errors.map((e) => `ERROR: ${e.split('\n')[0]}`);
  // A run ranked by another figure than req/s (lib/rounds.mjs, rankBy) lists that figure's rounds.
  if (run.rounds && run.rankBy)
    notes.unshift(`median of ${run.rankBy} ${run.rounds.map((r) => (r.rank == null ? '–' : r.rank.toPrecision(3))).join(', ')}`);
  else if (run.rounds) notes.unshift(`median of req/s ${run.rounds.map((r) => fmt.rps(r.rps)).join(', ')}`);
  if (run.involuntarySwitches != null && run.requests > 0) {
    notes.push(`preempted ${((run.involuntarySwitches * 1000) / run.requests).toFixed(1)} times per 1,000 calls`);
  }
  if (run.warnings?.length) notes.push(`disturbed: ${run.warnings.join(', ')}`);
  return notes.join('; ');
}

function runRow(run) {
  return [
    run.label,
    fmt.rps(run.rps),
    fmt.ms(run.p50Ms),
    fmt.ms(run.p99Ms),
    fmt.us(run.cpuUsPerRequest),
    fmt.mb(run.maxRssMb),
    runNote(run),
  ];
}

const RUN_HEAD = ['target', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'max RSS MB', 'notes'];
const WRK_TABLE = { head: RUN_HEAD, row: runRow, rightAligned: new Set([1, 2, 3, 4, 5]) };

/** Run tables of sections whose figures are not wrk's, by section id; every other section gets WRK_TABLE. */
const runTables = new Map();

/**
 * A section with figures of its own registers its table: `head` (column names), `row(run)` (its cells,
 * as strings) and `rightAligned` (a Set of column indexes).
 */
export function registerRunTable(sectionId, table) {
  runTables.set(sectionId, table);
}

const CHECK_HEAD = ['check', 'value', 'target', 'result', 'per round'];

function checkRow(c) {
  const show = c.name.includes('RSS') ? fmt.mb : fmt.ratio;
  return [c.name, show(c.value), c.target, c.note ? `${c.status} (${c.note})` : c.status, c.rounds ? c.rounds.map(show).join(', ') : ''];
}

/** Columns padded to their widest cell; numeric columns right-aligned. */
function textTable(head, rows, rightAligned) {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) =>
    cells
      .map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]) : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function markdownTable(head, rows) {
  const esc = (c) => c.replace(/\|/g, '\\|');
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`)].join(
    '\n',
  );
}

export function sectionText(section) {
  const t = runTables.get(section.id) ?? WRK_TABLE;
  const parts = [`== ${section.title}`, textTable(t.head, section.runs.map(t.row), t.rightAligned)];
  if (section.checks?.length) parts.push('', textTable(CHECK_HEAD, section.checks.map(checkRow), new Set([1])));
  return parts.join('\n');
}

export function sectionMarkdown(section) {
  const t = runTables.get(section.id) ?? WRK_TABLE;
  const parts = [`### ${section.title}`, '', markdownTable(t.head, section.runs.map(t.row))];
  if (section.checks?.length) parts.push('', markdownTable(CHECK_HEAD, section.checks.map(checkRow)));
  return parts.join('\n');
}

/** The heading a developer pastes into bench/RESULTS.md above the tables: when, where, how. */
export function markdownHeading(result) {
  const { environment: e, settings: s } = result;
  return [
    `## ${result.date.slice(0, 10)}${result.commit ? ` (${result.commit.slice(0, 10)})` : ''}`,
    '',
    `Node ${e.node}, ${e.cpus} cores (${e.cpuModel}), wrk ${e.wrk ?? '–'}, nginx ${e.nginx ?? '–'}. ` +
      `wrk -t${s.threads} -c${s.connections} -d${s.seconds}s after ${s.warmupSeconds}s of warm-up` +
      (s.rounds > 1 ? `, median of ${s.rounds} interleaved rounds; ` : '; ') +
      (s.pin
        ? `server under test on core ${s.serverCore}, wrk and upstream on core ${s.loadCore}; ` +
          `http-proxy's rows with 2 workers: server, upstream and wrk unpinned (cores ${s.unpinnedCores}); ` +
          `ws-fanout's: server on cores ${s.spreadCores}.`
        : 'no CPU pinning.') +
      (s.anvilQuiet ? ' anvil --quiet.' : '') +
      (s.cpuProfDir
        ? " http-proxy's, forward-cost's and many-keys' gateways under node --cpu-prof (BENCH_CPU_PROF): their figures carry the profiler's cost."
        : '') +
      (result.baseline ? ` Baseline rows: commit ${result.baseline.commit.slice(0, 10)} (BENCH_BASELINE=${result.baseline.ref}).` : ''),
    '',
    `Command: \`${result.command}\``,
  ].join('\n');
}
