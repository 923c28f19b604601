// A semantic router's block on a model row (docs/routing.md "Semantic routing"): AISIX's `semantic` fields.
// The runtime that embeds and picks a route is src/routing/semantic.ts.
import { z } from 'zod';

const unitInterval = z.number().min(0).max(1);
/** The classifier call's deadline when the row sets none. */
export const CLASSIFIER_TIMEOUT_MS = 5000;

export const SemanticRouteSchema = z.strictObject({
  /** Sent back in `x-aisix-route` when the route served. */
  name: z.string().min(1, 'must not be empty'),
  /** A direct model's display name. */
  target: z.string().min(1, 'must not be empty'),
  /** Documentation only, as in AISIX: matching reads `examples`. */
  description: z.string().min(1, 'must not be empty').optional(),
  examples: z.array(z.string().min(1, 'an example must not be empty')).min(1, 'needs at least one example'),
  /** Overrides `match.threshold` for this route. */
  threshold: unitInterval.optional(),
});
export type SemanticRoute = z.infer<typeof SemanticRouteSchema>;

const FailurePolicySchema = z.union([
  z.enum(['default', 'fail']),
  z.strictObject({ target: z.string().min(1, 'must not be empty') }),
]);

/**
 * The classifier mode: one call to a hosted decision model (a `typesafe` provider key's System One API)
 * picks a route by its `description` instead of the embedding match.
 */
export const SemanticClassifierSchema = z.strictObject({
  /** A provider key whose `provider` is `typesafe` (`provider_key` by display name in a file). */
  provider_key_id: z.string().min(1, 'must not be empty'),
  /** The decision model, e.g. `jev-latest`. */
  model: z.string().min(1, 'must not be empty'),
  /** A pick below this confidence serves `default`. */
  min_confidence: unitInterval.default(0),
  /** ms the call may take; past it, `on_failure` applies. */
  timeout_ms: z.number().int().positive().default(CLASSIFIER_TIMEOUT_MS),
  on_failure: FailurePolicySchema.default('default'),
});
export type SemanticClassifier = z.infer<typeof SemanticClassifierSchema>;

export const SemanticSchema = z.strictObject({
  /** A direct model with an `embedding` block, by display name. */
  embedding_model: z.string().min(1, 'must not be empty'),
  routes: z.array(SemanticRouteSchema).min(1, 'needs at least one route'),
  /** The direct model served when no route clears its threshold. */
  default: z.string().min(1, 'must not be empty'),
  match: z.strictObject({
    threshold: unitInterval,
    distance_metric: z.enum(['cosine']).default('cosine'),
    aggregation: z.enum(['max']).default('max'),
  }),
  /** ms; 0 or absent: the embedding model's own `timeout`, then the deployment's. */
  embedding_timeout_ms: z.number().int().nonnegative().optional(),
  on_embedding_failure: FailurePolicySchema.default('default'),
  /** Present: the classifier picks the route and no embedding is made. */
  classifier: SemanticClassifierSchema.optional(),
});
export type Semantic = z.infer<typeof SemanticSchema>;

/** Every model a router can send a request to: the routes' targets, `default`, the failure targets. */
export function semanticTargets(s: Semantic): string[] {
  const names = [...s.routes.map((r) => r.target), s.default];
  if (typeof s.on_embedding_failure === 'object') names.push(s.on_embedding_failure.target);
  if (typeof s.classifier?.on_failure === 'object') names.push(s.classifier.on_failure.target);
  return [...new Set(names)];
}
