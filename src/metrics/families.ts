/**
 * Metric families whose children are plain numbers, exposed through prom-client's registry.
 *
 * prom-client's own children hash their label set on every inc() and observe() (a string built per
 * call), and an observe() costs about 1 µs: measured on the forwarded call, counting each request that
 * way took 10 % more CPU per request (docs/decisions.md). Here a child is an object holding its numbers,
 * found once and kept by whoever counts; the label set is only looked at when Prometheus scrapes, when
 * each family hands the registry its values and the library writes the exposition format.
 */

type MetricType = 'counter' | 'gauge' | 'histogram';

/** What a family registers with: prom-client's Registry, or a worker thread's plain list (registry.ts). */
export interface Registrar {
  registerMetric(metric: never): void;
}

interface Value {
  value: number;
  labels: Record<string, string>;
  metricName?: string;
}

/**
 * How a family's values from several worker threads combine into one (prom-client's AggregatorRegistry):
 * counts add up; a gauge every thread mirrors from the main thread (a head, a rotation) is the highest.
 */
export type Aggregator = 'sum' | 'max';

interface FamilyOptions {
  name: string;
  help: string;
  aggregator?: Aggregator;
  labelNames?: readonly string[];
  registers: readonly Registrar[];
}

export class CounterChild {
  value = 0;
  inc(n = 1): void {
    this.value += n;
  }
}

export class GaugeChild {
  value = 0;
  inc(n = 1): void {
    this.value += n;
  }
  dec(n = 1): void {
    this.value -= n;
  }
  set(v: number): void {
    this.value = v;
  }
}

export class HistogramChild {
  /** Observations per bucket (not cumulative), the last one above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
}

/** Children of a labelled metric by one label value, made once and kept: a lookup without the family's joined key. */
export function memo<T>(make: (key: string) => T): (key: string) => T {
  const made = new Map<string, T>();
  return (key) => {
    let v = made.get(key);
    if (v === undefined) made.set(key, (v = make(key)));
    return v;
  };
}

/** One metric family: its children by label values, registered with the registries as prom-client metrics are. */
abstract class Family<C> {
  readonly name: string;
  readonly help: string;
  readonly aggregator: Aggregator;
  abstract readonly type: MetricType;
  private readonly labelNames: readonly string[];
  private readonly children = new Map<string, { values: readonly string[]; child: C }>();

  constructor(opts: FamilyOptions) {
    this.name = opts.name;
    this.help = opts.help;
    this.labelNames = opts.labelNames ?? [];
    this.aggregator = opts.aggregator ?? 'sum';
    for (const r of opts.registers) r.registerMetric(this as never);
  }

  protected abstract make(): C;
  protected abstract values(labels: Record<string, string>, child: C): Value[];

  /** The child of these label values (in labelNames' order), made on first use; keep it. */
  labels(...values: string[]): C {
    const key = values.join('\u0000');
    let entry = this.children.get(key);
    if (entry === undefined) this.children.set(key, (entry = { values, child: this.make() }));
    return entry.child;
  }

  /** Drops the series of these label values. */
  remove(...values: string[]): void {
    this.children.delete(values.join('\u0000'));
  }

  /** Drops every series whose label `name` is `value` (a chain a reload removed); none without that label. */
  removeWhere(name: string, value: string): void {
    const at = this.labelNames.indexOf(name);
    if (at < 0) return;
    for (const [key, entry] of this.children) if (entry.values[at] === value) this.children.delete(key);
  }

  /** What the registry writes: every child's values. */
  get(): { name: string; help: string; type: MetricType; values: Value[]; aggregator: string } {
    const values: Value[] = [];
    for (const { values: lv, child } of this.children.values()) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((n, i) => {
        labels[n] = lv[i]!;
      });
      values.push(...this.values(labels, child));
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

export class CounterFamily extends Family<CounterChild> {
  readonly type = 'counter';
  protected make(): CounterChild {
    return new CounterChild();
  }
  protected values(labels: Record<string, string>, c: CounterChild): Value[] {
    return [{ value: c.value, labels }];
  }
  /** For a family without labels. */
  inc(n = 1): void {
    this.labels().inc(n);
  }
}

export class GaugeFamily extends Family<GaugeChild> {
  readonly type = 'gauge';
  protected make(): GaugeChild {
    return new GaugeChild();
  }
  protected values(labels: Record<string, string>, g: GaugeChild): Value[] {
    return [{ value: g.value, labels }];
  }
  /** For a family without labels. */
  set(v: number): void {
    this.labels().set(v);
  }
}

export class HistogramFamily extends Family<HistogramChild> {
  readonly type = 'histogram';
  private readonly bounds: readonly number[];
  constructor(opts: FamilyOptions & { buckets: readonly number[] }) {
    super(opts);
    this.bounds = [...opts.buckets].sort((a, b) => a - b);
  }
  protected make(): HistogramChild {
    return new HistogramChild(this.bounds);
  }
  protected values(labels: Record<string, string>, h: HistogramChild): Value[] {
    const out: Value[] = [];
    let cumulative = 0;
    this.bounds.forEach((le, i) => {
      cumulative += h.counts[i]!;
      out.push({ value: cumulative, labels: { ...labels, le: String(le) }, metricName: `${this.name}_bucket` });
    });
    out.push({ value: h.count, labels: { ...labels, le: '+Inf' }, metricName: `${this.name}_bucket` });
    out.push({ value: h.sum, labels, metricName: `${this.name}_sum` });
    out.push({ value: h.count, labels, metricName: `${this.name}_count` });
    return out;
  }
  /** For a family without labels. */
  observe(v: number): void {
    this.labels().observe(v);
  }
}
