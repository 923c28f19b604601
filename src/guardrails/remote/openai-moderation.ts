// `kind: openai_moderation`: POST {endpoint}/moderations with the joined text (docs/guardrails.md). No
// thresholds: `flagged` decides; thresholds: only the listed categories, blocking at score ≥ threshold.
import type { Built } from '../keyword.ts';
import type { OpenAiModerationRow } from '../schema.ts';
import { ALLOW, type CheckContext, joined, type Outcome, type Segment } from '../types.ts';
import { callJson, isRecord, join, malformed } from './http.ts';

const SERVICE = 'openai_moderation';

export function buildOpenAiModeration(
  row: OpenAiModerationRow,
): Built<(s: readonly Segment[], ctx: CheckContext) => Promise<Outcome>> {
  const thresholds = Object.entries(row.category_thresholds);
  for (const [name, t] of thresholds) {
    if (!(t >= 0 && t <= 1)) return { ok: false, error: `category_thresholds.${name}: must be between 0 and 1` };
  }
  const url = join(row.endpoint, '/moderations');
  return {
    ok: true,
    value: async (segments, ctx) => {
      const r = await callJson(ctx, {
        service: SERVICE,
        url,
        headers: { authorization: `Bearer ${row.api_key}` },
        body: { model: row.model, input: joined(segments) },
        timeoutMs: row.timeout_ms,
      });
      if (!r.ok) return { kind: 'unavailable', tag: r.tag, reason: r.reason };
      if (!isRecord(r.body) || !Array.isArray(r.body.results)) return malformed(SERVICE, 'no `results` array');
      const first: unknown = r.body.results[0];
      if (first === undefined) return ALLOW;
      if (!isRecord(first)) return malformed(SERVICE, '`results[0]` is not an object');
      if (thresholds.length === 0) {
        if (first.flagged !== true) return ALLOW;
        const cats = isRecord(first.categories)
          ? Object.keys(first.categories).filter((k) => (first.categories as Record<string, unknown>)[k] === true)
          : [];
        return { kind: 'block', reason: `flagged by openai moderation (${cats.join(', ')})` };
      }
      const scores = isRecord(first.category_scores) ? first.category_scores : {};
      const over = thresholds.filter(([name, t]) => typeof scores[name] === 'number' && (scores[name] as number) >= t);
      if (over.length === 0) return ALLOW;
      return { kind: 'block', reason: `openai moderation scores over threshold (${over.map(([n]) => n).join(', ')})` };
    },
  };
}
