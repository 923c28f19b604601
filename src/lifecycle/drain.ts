// The shutdown sequence (docs/operations.md "The drain, step by step"): readiness fails at once, the proxy
// keeps accepting for at least `min_drain_secs`, then the gateway waits for in-flight work to reach zero
// (the platform's SIGKILL is the bound), closes its listeners, writes the `drain report` line and exits 0.
import type { Logger } from '../observability/logger.ts';
import { MSG } from '../observability/messages.ts';
import type { Listener, SignalName } from '../platform.ts';
import { drainReport } from './drain-report.ts';
import type { Signals } from './signals.ts';
import type { Lifecycle } from './state.ts';

/** What the drain reads and moves (the Gateway has all of it). */
export interface DrainSubject {
  readonly lifecycle: Lifecycle;
  readonly log: Logger;
  /** The bound proxy listener; undefined when the boot never bound it. */
  readonly proxyListener: Listener | undefined;
  readonly config: { readonly shutdown: { readonly min_drain_secs: number } };
  /** Trace export: what it holds is delivered while the listeners close. */
  readonly telemetry?: { close(deadlineMs: number): Promise<void> };
  /** Usage-event export: likewise. */
  readonly usage?: { close(deadlineMs: number): Promise<void> };
}

const PROGRESS_EVERY_MS = 5000;
/** How long the drain lets trace exporters deliver what they hold (one export POST's timeout). */
const TRACE_FLUSH_MS = 5000;

export async function runDrain(gw: DrainSubject, signals: Signals, listeners: Listener[]): Promise<void> {
  const { lifecycle, log } = gw;
  const signal: SignalName = await signals.stopped;
  const minDrainSecs = gw.config.shutdown.min_drain_secs;
  lifecycle.beginDrain(minDrainSecs);
  log.info(MSG.receivedSignal(signal));
  signals.onRepeat((s) => log.info(MSG.receivedSignal(s), { note: 'already draining; the drain continues' }));
  gw.proxyListener?.beginDrain();
  const counts = () => ({ in_flight: lifecycle.inFlight, open_connections: gw.proxyListener?.openConnections() });
  log.info(MSG.draining, { min_drain_secs: minDrainSecs, ...counts() });
  const progress = setInterval(() => log.info(MSG.stillDraining, counts()), PROGRESS_EVERY_MS);
  try {
    if (minDrainSecs > 0) await new Promise((r) => setTimeout(r, minDrainSecs * 1000));
    await lifecycle.whenIdle();
  } finally {
    clearInterval(progress);
  }
  log.info(MSG.drainComplete, counts());
  // Every request has ended, so every span is queued: deliver them while the listeners close.
  await Promise.allSettled([
    ...listeners.map((l) => l.close()),
    gw.telemetry?.close(TRACE_FLUSH_MS),
    gw.usage?.close(TRACE_FLUSH_MS),
  ]);
  const facts = lifecycle.endDrain();
  log.info(MSG.drainReport, { ...drainReport(facts, facts.endedAt!) }); // non-null: endDrain sets it
  lifecycle.stop();
  log.info(MSG.shutDownCleanly);
}
