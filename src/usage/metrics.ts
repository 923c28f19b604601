// The usage families (docs/usage-events.md "Metrics"): AISIX's event drops and tokens by client, and Sluice's
// per-exporter delivery counters. `aisix_usage_events_emitted_total` is the gateway's (gateway-metrics.ts).
import { Counter, type Registry } from '../observability/metrics.ts';

/** Why an event did not reach an exporter's queue: AISIX's `reason` values. */
export type EventDropReason = 'sink_full' | 'sink_closed' | 'sink_disabled';

/** Why a queued record was not delivered (Sluice's, as the OTLP exporter's). */
export type RecordDropReason = 'rejected' | 'retries_exhausted' | 'shutdown';

export class UsageMetrics {
  readonly drops: Counter;
  readonly tokensByClient: Counter;
  readonly delivered: Counter;
  readonly failures: Counter;
  readonly undelivered: Counter;

  constructor(registry: Registry) {
    this.drops = registry.register(
      new Counter('aisix_usage_event_drops_total', 'Usage events no sink took, by reason.', [
        'reason',
        'model',
        'provider_key_id',
        'provider_key_name',
      ]),
    );
    this.tokensByClient = registry.register(
      new Counter('aisix_llm_tokens_by_client_total', 'Tokens by the client program that sent the request.', [
        'client_type',
        'model',
        'token_type',
      ]),
    );
    this.delivered = registry.register(
      new Counter('sluice_usage_exporter_delivered_total', 'Usage records an exporter delivered.', ['exporter']),
    );
    this.failures = registry.register(
      new Counter('sluice_usage_exporter_failures_total', 'Failed deliveries of a batch (each try).', ['exporter']),
    );
    this.undelivered = registry.register(
      new Counter('sluice_usage_exporter_dropped_total', 'Queued usage records an exporter gave up on.', [
        'exporter',
        'reason',
      ]),
    );
  }
}

const byRegistry = new WeakMap<Registry, UsageMetrics>();

/** The usage families of a registry, registered once however many apps share it. */
export function usageMetricsFor(registry: Registry): UsageMetrics {
  let m = byRegistry.get(registry);
  if (!m) {
    m = new UsageMetrics(registry);
    byRegistry.set(registry, m);
  }
  return m;
}
