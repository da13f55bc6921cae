/**
 * Plain-text tables for the command line: a header row, columns padded to their widest cell,
 * two spaces apart, no trailing spaces (so `awk` and `column` read them as they are).
 */
export function formatTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

/** Unix seconds as `YYYY-MM-DD HH:MM:SSZ` (UTC), the form an operator reads and sorts. */
export function formatTime(unixSeconds: number): string {
  return new Date(unixSeconds * 1000).toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, 'Z');
}
