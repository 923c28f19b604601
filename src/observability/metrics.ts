// A small Prometheus registry (text format 0.0.4). prom-client needs Node built-ins, so it cannot run on
// Workers; this one is plain TypeScript. Label values are escaped; label sets are bounded by the callers.

type LabelValues = readonly string[];

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labelString(names: readonly string[], values: LabelValues, extra?: string): string {
  const parts: string[] = [];
  for (let i = 0; i < names.length; i++) parts.push(`${names[i]}="${escapeLabel(values[i] ?? '')}"`);
  if (extra) parts.push(extra);
  return parts.length ? `{${parts.join(',')}}` : '';
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

interface Metric {
  readonly name: string;
  render(out: string[]): void;
}

abstract class Family<T> implements Metric {
  protected readonly series = new Map<string, { values: LabelValues; data: T }>();
  constructor(readonly name: string, readonly help: string, readonly type: string, readonly labelNames: readonly string[]) {}

  protected entry(values: LabelValues, init: () => T): T {
    const key = values.length === 0 ? '' : values.length === 1 ? values[0]! : values.join('\u0000');
    let e = this.series.get(key);
    if (!e) {
      e = { values: [...values], data: init() };
      this.series.set(key, e);
    }
    return e.data;
  }

  /** Forget every series (used by gauges whose label sets follow the configuration). */
  reset(): void {
    this.series.clear();
  }

  render(out: string[]): void {
    out.push(`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${this.type}`);
    for (const { values, data } of this.series.values()) this.renderSeries(out, values, data);
  }

  protected abstract renderSeries(out: string[], values: LabelValues, data: T): void;
}

export class Counter extends Family<{ v: number }> {
  constructor(name: string, help: string, labelNames: readonly string[] = []) {
    super(name, help, 'counter', labelNames);
  }
  inc(values: LabelValues = [], by = 1): void {
    this.entry(values, () => ({ v: 0 })).v += by;
  }
  get(values: LabelValues = []): number {
    return this.entry(values, () => ({ v: 0 })).v;
  }
  protected renderSeries(out: string[], values: LabelValues, d: { v: number }): void {
    out.push(`${this.name}${labelString(this.labelNames, values)} ${formatValue(d.v)}`);
  }
}

export class Gauge extends Family<{ v: number }> {
  constructor(name: string, help: string, labelNames: readonly string[] = [],
    private readonly collect?: (g: Gauge) => void) {
    super(name, help, 'gauge', labelNames);
  }
  set(values: LabelValues, v: number): void {
    this.entry(values, () => ({ v: 0 })).v = v;
  }
  inc(values: LabelValues = [], by = 1): void {
    this.entry(values, () => ({ v: 0 })).v += by;
  }
  override render(out: string[]): void {
    this.collect?.(this);
    super.render(out);
  }
  protected renderSeries(out: string[], values: LabelValues, d: { v: number }): void {
    out.push(`${this.name}${labelString(this.labelNames, values)} ${formatValue(d.v)}`);
  }
}

interface HistogramData {
  counts: Float64Array;
  sum: number;
  count: number;
}

export const DEFAULT_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export class Histogram extends Family<HistogramData> {
  constructor(name: string, help: string, labelNames: readonly string[] = [], readonly buckets = DEFAULT_SECONDS_BUCKETS) {
    super(name, help, 'histogram', labelNames);
  }
  observe(values: LabelValues, v: number): void {
    const d = this.entry(values, () => ({ counts: new Float64Array(this.buckets.length), sum: 0, count: 0 }));
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]!) d.counts[i]! += 1;
    d.sum += v;
    d.count += 1;
  }
  protected renderSeries(out: string[], values: LabelValues, d: HistogramData): void {
    for (let i = 0; i < this.buckets.length; i++) {
      out.push(`${this.name}_bucket${labelString(this.labelNames, values, `le="${formatValue(this.buckets[i]!)}"`)} ${d.counts[i]}`);
    }
    out.push(`${this.name}_bucket${labelString(this.labelNames, values, 'le="+Inf"')} ${d.count}`);
    out.push(`${this.name}_sum${labelString(this.labelNames, values)} ${formatValue(d.sum)}`);
    out.push(`${this.name}_count${labelString(this.labelNames, values)} ${d.count}`);
  }
}

export class Registry {
  private readonly metrics: Metric[] = [];

  register<M extends Metric>(m: M): M {
    if (this.metrics.some((x) => x.name === m.name)) throw new Error(`metric ${m.name} registered twice`);
    this.metrics.push(m);
    return m;
  }

  render(): string {
    const out: string[] = [];
    for (const m of this.metrics) m.render(out);
    return `${out.join('\n')}\n`;
  }
}

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
