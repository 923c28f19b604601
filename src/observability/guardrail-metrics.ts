// AISIX's guardrail families (docs/guardrails.md "Metrics and logs"): one latency sample per chain member per
// hook, the per-request block and bypass counters, and the semantic kind's model families (docs/guardrails.md
// "semantic"). The chain (src/guardrails/chain.ts) writes them.
import { Counter, Histogram, type Registry } from './metrics.ts';

export const GUARDRAIL_LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export type GuardrailResult = 'allowed' | 'blocked' | 'masked' | 'bypassed' | 'would_block' | 'would_mask';

/** A standalone gateway has no managed environment: the `env_id` label AISIX writes then. */
const ENV_ID = 'unknown';

export class GuardrailMetrics {
  readonly latency: Histogram;
  readonly blocks: Counter;
  readonly bypasses: Counter;
  /** Never incremented: Sluice loads no model, so the family stays unrendered, as AISIX's without calls. */
  readonly semanticModelCalls: Counter;
  readonly semanticDegraded: Counter;
  /** Per guardrail name: the results seen since start (the status page). */
  readonly perGuardrail = new Map<string, Partial<Record<GuardrailResult, number>>>();

  constructor(registry: Registry) {
    this.latency = registry.register(
      new Histogram(
        'aisix_guardrail_latency_seconds',
        'Guardrail evaluation latency, per chain member and hook.',
        ['env_id', 'guardrail', 'kind', 'phase', 'result', 'error_type'],
        GUARDRAIL_LATENCY_BUCKETS,
      ),
    );
    this.blocks = registry.register(new Counter('aisix_guardrail_blocks_total', 'Requests blocked by a guardrail.'));
    this.bypasses = registry.register(
      new Counter('aisix_guardrail_bypasses_total', 'Requests a failing guardrail let through, by reason.', ['reason']),
    );
    this.semanticModelCalls = registry.register(
      new Counter('aisix_guardrail_semantic_model_calls_total', 'Embedding-model calls of semantic guardrails.'),
    );
    this.semanticDegraded = registry.register(
      new Counter(
        'aisix_guardrail_semantic_degraded_total',
        'Semantic guardrail spans left to the rule layers without a model judgement, by reason.',
        ['reason'],
      ),
    );
  }

  observe(
    g: { name: string; kind: string },
    phase: 'input' | 'output',
    result: GuardrailResult,
    errorType: string | undefined,
    seconds: number,
  ): void {
    this.latency.observe([ENV_ID, g.name, g.kind, phase, result, errorType ?? 'none'], seconds);
    let counts = this.perGuardrail.get(g.name);
    if (!counts) {
      counts = {};
      this.perGuardrail.set(g.name, counts);
    }
    counts[result] = (counts[result] ?? 0) + 1;
  }
}

const byRegistry = new WeakMap<Registry, GuardrailMetrics>();

/** The guardrail families of a registry, registered on first use (an idle gateway renders none of them). */
export function guardrailMetricsFor(registry: Registry): GuardrailMetrics {
  let m = byRegistry.get(registry);
  if (!m) {
    m = new GuardrailMetrics(registry);
    byRegistry.set(registry, m);
  }
  return m;
}
