/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for tests: every line is
 * a `# HELP`, a `# TYPE` or a sample, or parse() throws naming the line. Samples are keyed by their
 * series as written (`name{a="x",b="y"}`), labels in the order the exporter wrote them.
 */
const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*",?)*\})? (\S+)( -?\d+)?$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export interface Exposition {
  /** Each sample's value by series. */
  readonly samples: ReadonlyMap<string, number>;
  /** Each metric family's type by name (from its # TYPE line). */
  readonly types: ReadonlyMap<string, string>;
  /** The value of `name` with exactly `labels` (any order); 0 when the series is absent. */
  value(name: string, labels?: Record<string, string>): number;
  /** Every series of `name`, with its labels. */
  series(name: string): Array<{ labels: Record<string, string>; value: number }>;
}

function labelsOf(block: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!block) return out;
  for (const m of block.slice(1, -1).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) out[m[1]!] = m[2]!.replace(/\\(.)/g, '$1');
  return out;
}

export function parseExposition(text: string): Exposition {
  const samples = new Map<string, number>();
  const types = new Map<string, string>();
  const parsed: Array<{ name: string; labels: Record<string, string>; value: number }> = [];
  text.split('\n').forEach((line, i) => {
    if (line === '') return;
    if (line.startsWith('# HELP ')) {
      if (!NAME.test(line.slice(7).split(' ')[0]!)) throw new Error(`line ${i + 1}: bad HELP: ${line}`);
      return;
    }
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice(7).split(' ');
      if (!NAME.test(name ?? '') || !TYPES.has(type ?? '')) throw new Error(`line ${i + 1}: bad TYPE: ${line}`);
      types.set(name!, type!);
      return;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`line ${i + 1}: not a sample: ${line}`);
    // Go's ParseFloat, which Prometheus reads values with, takes Inf and NaN in any case (prom-client writes Nan).
    const special = /^([+-]?)(inf|nan)$/i.exec(m[3]!);
    const value = special ? (special[2]!.toLowerCase() === 'nan' ? NaN : special[1] === '-' ? -Infinity : Infinity) : Number(m[3]);
    if (!special && (Number.isNaN(value) || !/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(m[3]!)))
      throw new Error(`line ${i + 1}: not a number: ${line}`);
    samples.set(m[1]! + (m[2] ?? ''), value);
    parsed.push({ name: m[1]!, labels: labelsOf(m[2]), value });
  });
  const same = (a: Record<string, string>, b: Record<string, string>): boolean =>
    Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v);
  return {
    samples,
    types,
    value: (name, labels = {}) => parsed.find((s) => s.name === name && same(s.labels, labels))?.value ?? 0,
    series: (name) => parsed.filter((s) => s.name === name).map(({ labels, value }) => ({ labels, value })),
  };
}

/** GET /metrics on `port` (with `token` as a Bearer token when given), parsed. */
export async function scrape(port: number, token?: string): Promise<Exposition> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}: ${await res.text()}`);
  return parseExposition(await res.text());
}
