// The shutdown sequence (docs/operations.md): readiness fails at once, the proxy keeps accepting for at least
// `min_drain_secs`, then the gateway waits with no deadline of its own for in-flight work to reach zero
// (the platform's SIGKILL is the bound), closes its listeners and exits 0. Further signals are logged and
// change nothing. Once the listeners are closed, one `drain report` line sizes the window from what this
// drain saw (src/lifecycle/drain-report.ts).
import type { Gateway } from '../gateway.ts';
import { MSG } from '../observability/messages.ts';
import type { Listener, SignalName } from '../platform.ts';
import { drainReport } from './drain-report.ts';
import type { Signals } from './signals.ts';

const PROGRESS_EVERY_MS = 5000;
/** How long the drain lets trace exporters deliver what they hold (one export POST's timeout). */
const TRACE_FLUSH_MS = 5000;

export async function runDrain(gw: Gateway, signals: Signals, listeners: Listener[]): Promise<void> {
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
  await Promise.allSettled([...listeners.map((l) => l.close()), gw.telemetry.close(TRACE_FLUSH_MS)]);
  const facts = lifecycle.drain!; // non-null: beginDrain above
  facts.endedAt = Date.now();
  log.info(MSG.drainReport, { ...drainReport(facts, facts.endedAt) });
  lifecycle.stop();
  log.info(MSG.shutDownCleanly);
}
