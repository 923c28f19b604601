// The drain report (docs/operations.md "Sizing from a real rollout"): what one drain observed, turned into a
// verdict on `shutdown.min_drain_secs` and the numbers to size it and the platform's grace period from,
// derived by one pure function from the facts the lifecycle recorded (state.ts).
import { Gauge, type Registry } from '../observability/metrics.ts';
import type { DrainFacts, Lifecycle } from './state.ts';

export type DrainVerdict = 'window_too_short' | 'ok' | 'window_generous' | 'no_arrivals';

export interface DrainReport {
  complete: boolean;
  signal_at: string;
  min_drain_secs: number;
  readyz_failed_probes: number;
  /** Seconds from the signal to the last caller request that arrived (probes excluded); null if none did. */
  last_arrival_after_secs: number | null;
  arrivals_while_draining: number;
  new_connections_while_draining: number;
  longest_in_flight_secs: number;
  /** Signal to exit (listeners closed); while draining, signal to now. */
  drain_secs: number;
  verdict: DrainVerdict | null;
  recommended_min_drain_secs: number | null;
  recommended_grace_period_secs: number | null;
}

/** A caller arriving in the last 10% of the window (or after it) means the balancer was still routing. */
export const TOO_SHORT_FROM = 0.9;
/** The last caller arriving before 25% of the window means the exit could come sooner. */
export const GENEROUS_BEFORE = 0.25;
export const MIN_RECOMMENDED_DRAIN_SECS = 5;
export const GRACE_MARGIN_SECS = 10;

const secs = (ms: number): number => Math.round(ms) / 1000;

export function drainVerdict(minDrainSecs: number, lastArrivalSecs: number | null): DrainVerdict {
  if (lastArrivalSecs === null) return 'no_arrivals';
  if (lastArrivalSecs >= TOO_SHORT_FROM * minDrainSecs) return 'window_too_short';
  if (lastArrivalSecs < GENEROUS_BEFORE * minDrainSecs) return 'window_generous';
  return 'ok';
}

/** The report of a drain, at `now` (Unix ms) when it is still running. */
export function drainReport(f: DrainFacts, now: number): DrainReport {
  const complete = f.endedAt !== undefined;
  const end = f.endedAt ?? now;
  const last = f.lastArrivalAt === undefined ? null : secs(f.lastArrivalAt - f.signalAt);
  const longest = secs(f.longestInFlightMs);
  const decided = complete || end - f.signalAt >= f.minDrainSecs * 1000;
  const verdict = decided ? drainVerdict(f.minDrainSecs, last) : null;
  const window = verdict && last !== null ? Math.max(MIN_RECOMMENDED_DRAIN_SECS, Math.ceil(2 * last)) : null;
  return {
    complete,
    signal_at: new Date(f.signalAt).toISOString(),
    min_drain_secs: f.minDrainSecs,
    readyz_failed_probes: f.readyzFailedProbes,
    last_arrival_after_secs: last,
    arrivals_while_draining: f.arrivals,
    new_connections_while_draining: f.newConnections,
    longest_in_flight_secs: longest,
    drain_secs: secs(end - f.signalAt),
    verdict,
    recommended_min_drain_secs: window,
    recommended_grace_period_secs: window === null ? null : window + Math.ceil(longest) + GRACE_MARGIN_SECS,
  };
}

/** The `drain` member of `/admin/v1/health` and `/status/drain`: the report so far, null before a drain. */
export function drainReportBody(gw: { readonly lifecycle: Lifecycle }, now = gw.lifecycle.clock()): DrainReport | null {
  const f = gw.lifecycle.drain;
  return f ? drainReport(f, now) : null;
}

/**
 * `sluice_drain_window_seconds` (the configured window) and `sluice_drain_elapsed_seconds` (0 until a
 * drain starts): an alert compares them to catch a replica draining far longer than its window.
 */
export function registerDrainMetrics(registry: Registry, lifecycle: Lifecycle, minDrainSecs: number): void {
  registry.register(
    new Gauge('sluice_drain_window_seconds', 'The configured drain window, shutdown.min_drain_secs.', [], (g) => {
      g.set([], minDrainSecs);
    }),
  );
  registry.register(
    new Gauge('sluice_drain_elapsed_seconds', 'Seconds since the drain began (0 when not draining).', [], (g) => {
      const f = lifecycle.drain;
      g.set([], f ? secs((f.endedAt ?? lifecycle.clock()) - f.signalAt) : 0);
    }),
  );
}
