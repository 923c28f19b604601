// Small statistics helpers shared by the benchmark's clients and report.

/** Nearest-rank percentile (p in 0..100) of an unsorted sample; NaN when empty. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[rank]!;
}

/** Median of a sample (of rounds, typically); NaN when empty. */
export function median(xs: readonly number[]): number {
  const v = xs.filter((x) => Number.isFinite(x));
  if (v.length === 0) return NaN;
  const s = [...v].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}
export function summarize(xs: readonly number[]): Summary {
  return {
    n: xs.length,
    p50: percentile(xs, 50),
    p90: percentile(xs, 90),
    p99: percentile(xs, 99),
    max: xs.length ? xs.reduce((a, b) => (b > a ? b : a), -Infinity) : NaN,
  };
}
