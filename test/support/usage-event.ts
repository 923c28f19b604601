// A usage event for the exporters' tests (src/usage/event.ts): a `UsageEvent`, so its members keep AISIX's order.
import { UsageEvent } from '../../src/usage/event.ts';

/** An event with the members every exporter test sets, for request `id`. */
export function sampleUsageEvent(id: string): UsageEvent {
  return Object.assign(new UsageEvent(), {
    request_id: id,
    occurred_at: '2026-01-01T00:00:00Z',
    model_id: 'm1',
    api_key_id: 'k1',
    prompt_tokens: 1,
    completion_tokens: 2,
    upstream_latency_ms: 3,
    status_code: 200,
    cost_usd: 0,
    guardrail_blocked: false,
    attempt_index: 0,
  });
}
