// A small Prometheus registry (text format 0.0.4). prom-client needs Node built-ins, so it cannot run on
// Workers; this one is plain TypeScript. Label values are escaped; label sets are bounded by the callers.

type LabelValues = readonly string[];

/** The classes `statusClass` names: one constant string each, so a label lookup meets the string it holds, not a copy. */
const STATUS_CLASSES = ['other', 'other', '2xx', '3xx', '4xx', '5xx'] as const;

/** AISIX's status class label of an HTTP status: `2xx`, `3xx`, `4xx` or `5xx`; `other` for anything else. */
export function statusClass(status: number): string {
  return status >= 200 && status < 600 ? STATUS_CLASSES[Math.floor(status / 100)]! : 'other';
}

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

function sameValues(a: LabelValues, b: LabelValues): boolean {
  if (a.length !== b.length) return false;
  for (let i = a.length - 1; i >= 0; i--) if (a[i] !== b[i]) return false;
  return true;
}

interface Metric {
  readonly name: string;
  render(out: string[]): void;
}

interface Series<T> {
  values: LabelValues;
  data: T;
}

/** One level of the series index per label: label value → the next level, or the series at the last one. */
type Level<T> = Map<string, Level<T> | Series<T>>;

abstract class Family<T> implements Metric {
  // Series are found through one Map per label value rather than by a key joined from the values: the
  // request path updates several series per request, and a joined key is a new string to build and hash
  // each time (label values are mostly strings from the configuration, whose hashes V8 keeps).
  private index: Level<T> = new Map();
  /** Every series, in creation order (the exposition's order). */
  private series: Series<T>[] = [];
  /**
   * The series found last. Consecutive requests mostly carry the same label values (the same route, model,
   * key and status), so comparing the values with the last hit's (`===` per value, no hashing) finds the
   * series without walking the index; a miss costs one comparison that fails early, then the walk.
   */
  private last: Series<T> | undefined;
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: string,
    readonly labelNames: readonly string[],
  ) {}

  protected abstract init(): T;

  protected entry(values: LabelValues): T {
    const hit = this.last;
    if (hit !== undefined && sameValues(hit.values, values)) return hit.data;
    let level = this.index;
    const last = values.length - 1;
    for (let i = 0; i < last; i++) {
      let next = level.get(values[i]!) as Level<T> | undefined;
      if (next === undefined) {
        next = new Map();
        level.set(values[i]!, next);
      }
      level = next;
    }
    const leafKey = last >= 0 ? values[last]! : '';
    let e = level.get(leafKey) as Series<T> | undefined;
    if (e === undefined) {
      e = { values: [...values], data: this.init() };
      level.set(leafKey, e);
      this.series.push(e);
    }
    this.last = e;
    return e.data;
  }

  /** The series of `values`, if it exists (never creates one). */
  protected find(values: LabelValues): T | undefined {
    let level: Level<T> | Series<T> | undefined = this.index;
    for (let i = 0; i < values.length - 1; i++) {
      level = (level as Level<T>).get(values[i]!) as Level<T> | undefined;
      if (level === undefined) return undefined;
    }
    const leaf = (level as Level<T>).get(values.length > 0 ? values[values.length - 1]! : '') as Series<T> | undefined;
    return leaf?.data;
  }

  /** Every series with its label values, in creation order. */
  protected entries(): readonly Series<T>[] {
    return this.series;
  }

  /** Every series' data, in creation order. */
  protected all(): T[] {
    return this.series.map((s) => s.data);
  }

  /** Forget every series (used by gauges whose label sets follow the configuration). */
  reset(): void {
    this.index = new Map();
    this.series = [];
    this.last = undefined;
  }

  /** A family with no series is not written at all, not even `# HELP`/`# TYPE` (as AISIX's exporter). */
  render(out: string[]): void {
    if (this.series.length === 0) return;
    out.push(`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${this.type}`);
    for (const { values, data } of this.series) this.renderSeries(out, values, data);
  }

  protected abstract renderSeries(out: string[], values: LabelValues, data: T): void;
}

/**
 * Values found by label values through the same index as a family's series (nothing rendered, never
 * registered): for a caller that keeps something per label set, such as the series it has bound.
 */
export class LabelIndex<T> extends Family<T> {
  constructor(private readonly make: (values: LabelValues) => T) {
    super('', '', 'index', []);
  }
  private pending: LabelValues = [];
  protected init(): T {
    return this.make(this.pending);
  }
  /** The value of `values`, made (with those values) on the first call. */
  get(values: LabelValues): T {
    this.pending = values;
    return this.entry(values);
  }
  protected renderSeries(): void {}
}

/** One counter series, bound: updates it without finding it. */
export interface BoundCounter {
  inc(by?: number): void;
}

/** One summary or histogram series, bound: observes into it without finding it. */
export interface BoundObserver {
  /** `at`: the gateway clock's reading when the caller has just taken one (a summary's window); else read here. */
  observe(v: number, at?: number): void;
}

export class Counter extends Family<{ v: number }> {
  constructor(name: string, help: string, labelNames: readonly string[] = []) {
    super(name, help, 'counter', labelNames);
  }
  protected init(): { v: number } {
    return { v: 0 };
  }
  inc(values: LabelValues = [], by = 1): void {
    this.entry(values).v += by;
  }
  /** The series of `values`, created now as the first `inc` would create it. */
  bind(values: LabelValues): BoundCounter {
    const d = this.entry(values);
    return {
      inc(by = 1) {
        d.v += by;
      },
    };
  }
  /** The series' value; 0 (and no series created) when it does not exist. */
  get(values: LabelValues = []): number {
    return this.find(values)?.v ?? 0;
  }
  protected renderSeries(out: string[], values: LabelValues, d: { v: number }): void {
    out.push(`${this.name}${labelString(this.labelNames, values)} ${formatValue(d.v)}`);
  }
}

export class Gauge extends Family<{ v: number }> {
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[] = [],
    private readonly collect?: (g: Gauge) => void,
  ) {
    super(name, help, 'gauge', labelNames);
  }
  protected init(): { v: number } {
    return { v: 0 };
  }
  set(values: LabelValues, v: number): void {
    this.entry(values).v = v;
  }
  inc(values: LabelValues = [], by = 1): void {
    this.entry(values).v += by;
  }
  /** Every existing series to 0 (series once reported stay, at 0). */
  zero(): void {
    for (const d of this.all()) d.v = 0;
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
  /** Observations per bucket, not cumulative: `counts[i]` holds those above bucket i-1 and at most bucket i. */
  counts: Float64Array;
  sum: number;
  count: number;
}

export const DEFAULT_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export class Histogram extends Family<HistogramData> {
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[] = [],
    readonly buckets = DEFAULT_SECONDS_BUCKETS,
  ) {
    super(name, help, 'histogram', labelNames);
  }
  protected init(): HistogramData {
    return { counts: new Float64Array(this.buckets.length), sum: 0, count: 0 };
  }
  /** Counts only the first bucket `v` fits in; the exposition adds them up (`le` buckets are cumulative). */
  observe(values: LabelValues, v: number): void {
    this.observeInto(this.entry(values), v);
  }
  /** The series of `values`, created now as the first `observe` would create it. */
  bind(values: LabelValues): BoundObserver {
    const d = this.entry(values);
    return { observe: (v) => this.observeInto(d, v) };
  }
  private observeInto(d: HistogramData, v: number): void {
    const b = this.buckets;
    let i = 0;
    while (i < b.length && !(v <= b[i]!)) i++;
    if (i < b.length) d.counts[i]! += 1;
    d.sum += v;
    d.count += 1;
  }
  /** Each series' labels and per-bucket counts (not cumulative; the +Inf overflow is `count` minus their sum). */
  snapshot(): { values: LabelValues; counts: Float64Array; count: number; sum: number }[] {
    return this.entries().map(({ values, data }) => ({
      values,
      counts: data.counts,
      count: data.count,
      sum: data.sum,
    }));
  }
  protected renderSeries(out: string[], values: LabelValues, d: HistogramData): void {
    let cumulative = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      cumulative += d.counts[i]!;
      out.push(
        `${this.name}_bucket${
          labelString(this.labelNames, values, `le="${formatValue(this.buckets[i]!)}"`)
        } ${cumulative}`,
      );
    }
    out.push(`${this.name}_bucket${labelString(this.labelNames, values, 'le="+Inf"')} ${d.count}`);
    out.push(`${this.name}_sum${labelString(this.labelNames, values)} ${formatValue(d.sum)}`);
    out.push(`${this.name}_count${labelString(this.labelNames, values)} ${d.count}`);
  }
}

/** One sub-window of a summary's rolling window: a bounded sample of what was observed in it. */
interface SummaryWindow {
  /** Which sub-window of time this is (`floor(now / SUMMARY_SUB_WINDOW_MS)`); -1 = never used. */
  epoch: number;
  samples: Float64Array;
  /** Samples held (≤ capacity). */
  held: number;
  /** Observations made in this sub-window (≥ held: beyond the capacity a sample replaces another at random). */
  seen: number;
}

interface SummaryData {
  windows: SummaryWindow[];
  sum: number;
  count: number;
}

/** AISIX's exporter (metrics-exporter-prometheus): these quantiles, over a rolling window of 3 × 20 s. */
export const SUMMARY_QUANTILES = [0, 0.5, 0.9, 0.95, 0.99, 0.999, 1] as const;
export const SUMMARY_SUB_WINDOW_MS = 20_000;
const SUMMARY_WINDOWS = 3;
/** Samples kept per sub-window and series: beyond it the window holds a uniform random sample (reservoir). */
const SUMMARY_CAPACITY = 512;

/**
 * A Prometheus summary as AISIX renders one: `quantile` lines over the recent rolling window (0 when the
 * window is empty) plus cumulative `_sum`/`_count`, no buckets. Memory per series is bounded.
 */
export class Summary extends Family<SummaryData> {
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[] = [],
    private readonly now: () => number = Date.now,
  ) {
    super(name, help, 'summary', labelNames);
  }
  protected init(): SummaryData {
    const windows: SummaryWindow[] = [];
    for (let i = 0; i < SUMMARY_WINDOWS; i++) {
      windows.push({ epoch: -1, samples: new Float64Array(8), held: 0, seen: 0 });
    }
    return { windows, sum: 0, count: 0 };
  }
  observe(values: LabelValues, v: number): void {
    this.observeInto(this.entry(values), v, this.now());
  }
  /** The series of `values`, created now as the first `observe` would create it. */
  bind(values: LabelValues): BoundObserver {
    const d = this.entry(values);
    return { observe: (v, at) => this.observeInto(d, v, at ?? this.now()) };
  }
  private observeInto(d: SummaryData, v: number, at: number): void {
    d.sum += v;
    d.count += 1;
    const epoch = Math.floor(at / SUMMARY_SUB_WINDOW_MS);
    const w = d.windows[epoch % SUMMARY_WINDOWS]!;
    if (w.epoch !== epoch) {
      w.epoch = epoch;
      w.held = 0;
      w.seen = 0;
    }
    w.seen += 1;
    if (w.held < SUMMARY_CAPACITY) {
      if (w.held === w.samples.length) {
        const grown = new Float64Array(Math.min(SUMMARY_CAPACITY, w.samples.length * 4));
        grown.set(w.samples);
        w.samples = grown;
      }
      w.samples[w.held++] = v;
      return;
    }
    const slot = Math.floor(Math.random() * w.seen);
    if (slot < SUMMARY_CAPACITY) w.samples[slot] = v;
  }
  /** The quantiles of the rolling window, in `SUMMARY_QUANTILES` order; undefined when it is empty. */
  quantiles(values: LabelValues): number[] | undefined {
    const d = this.find(values);
    return d ? windowQuantiles(d, this.now()) : undefined;
  }
  protected renderSeries(out: string[], values: LabelValues, d: SummaryData): void {
    const q = windowQuantiles(d, this.now());
    for (let i = 0; i < SUMMARY_QUANTILES.length; i++) {
      const label = `quantile="${SUMMARY_QUANTILES[i]}"`;
      out.push(`${this.name}${labelString(this.labelNames, values, label)} ${formatValue(q?.[i] ?? 0)}`);
    }
    out.push(`${this.name}_sum${labelString(this.labelNames, values)} ${formatValue(d.sum)}`);
    out.push(`${this.name}_count${labelString(this.labelNames, values)} ${d.count}`);
  }
}

function windowQuantiles(d: SummaryData, now: number): number[] | undefined {
  const oldest = Math.floor(now / SUMMARY_SUB_WINDOW_MS) - SUMMARY_WINDOWS + 1;
  const all: number[] = [];
  for (const w of d.windows) {
    if (w.epoch < oldest) continue;
    for (let i = 0; i < w.held; i++) all.push(w.samples[i]!);
  }
  if (all.length === 0) return undefined;
  all.sort((a, b) => a - b);
  return SUMMARY_QUANTILES.map((q) => all[Math.min(all.length - 1, Math.max(0, Math.ceil(q * all.length) - 1))]!);
}

/**
 * The quantile `q` of a histogram series' buckets, interpolated linearly inside the bucket as PromQL's
 * `histogram_quantile` does; undefined when nothing was observed.
 */
export function bucketQuantile(buckets: readonly number[], counts: ArrayLike<number>, q: number): number | undefined {
  let total = 0;
  for (let i = 0; i < counts.length; i++) total += counts[i]!;
  if (total === 0) return undefined;
  const rank = q * total;
  let cumulative = 0;
  for (let i = 0; i < buckets.length; i++) {
    const before = cumulative;
    cumulative += counts[i]!;
    if (cumulative >= rank && counts[i]! > 0) {
      const lower = i === 0 ? 0 : buckets[i - 1]!;
      return lower + (buckets[i]! - lower) * ((rank - before) / counts[i]!);
    }
  }
  // Above the last edge (+Inf bucket): the last finite edge, as histogram_quantile answers.
  return buckets[buckets.length - 1];
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
