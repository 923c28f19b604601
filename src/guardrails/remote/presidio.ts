// `kind: presidio`: each non-empty segment analysed (POST {analyzer_url}/analyze), then the segments with hits
// anonymised (POST {anonymizer_url}/anonymize) with the row's operator (docs/guardrails.md). Any hit whose
// entity's action is `block` blocks; otherwise the anonymizer's text replaces the segment.
import type { Built } from '../keyword.ts';
import type { PresidioRow } from '../schema.ts';
import { ALLOW, type CheckContext, type Outcome, type Segment } from '../types.ts';
import { callJson, isRecord, join, malformed } from './http.ts';

const SERVICE = 'presidio';

const OPERATORS: Record<PresidioRow['operator'], Record<string, unknown>> = {
  replace: { type: 'replace' },
  mask: { type: 'mask', masking_char: '*', chars_to_mask: 512, from_end: false },
  hash: { type: 'hash', hash_type: 'sha256' },
  redact: { type: 'redact' },
};

interface Hit {
  entity_type: string;
  start: number;
  end: number;
  score: number;
}

function hitsOf(body: unknown): Hit[] | undefined {
  if (!Array.isArray(body)) return undefined;
  const out: Hit[] = [];
  for (const h of body) {
    if (!isRecord(h) || typeof h.entity_type !== 'string' || typeof h.start !== 'number' || typeof h.end !== 'number') {
      return undefined;
    }
    out.push({
      entity_type: h.entity_type,
      start: h.start,
      end: h.end,
      score: typeof h.score === 'number' ? h.score : 0,
    });
  }
  return out;
}

export function buildPresidio(row: PresidioRow): Built<(s: readonly Segment[], ctx: CheckContext) => Promise<Outcome>> {
  const actions = new Map(row.entities.map((e) => [e.type.toUpperCase(), e.action ?? row.default_action]));
  const entities = row.entities.length === 0 ? undefined : [...actions.keys()];
  const analyze = join(row.analyzer_url, '/analyze');
  const anonymize = join(row.anonymizer_url, '/anonymize');
  const call = (ctx: CheckContext, url: string, body: unknown) =>
    callJson(ctx, { service: SERVICE, url, headers: {}, body, timeoutMs: row.timeout_ms });
  return {
    ok: true,
    value: async (segments, ctx) => {
      const found: (Hit[] | undefined)[] = [];
      for (const s of segments) {
        if (s.text.trim() === '') {
          found.push(undefined);
          continue;
        }
        const body: Record<string, unknown> = { text: s.text, language: row.language };
        if (entities) body.entities = entities;
        if (row.score_threshold !== undefined) body.score_threshold = row.score_threshold;
        const r = await call(ctx, analyze, body);
        if (!r.ok) return { kind: 'unavailable', tag: r.tag, reason: r.reason };
        const hits = hitsOf(r.body);
        if (!hits) return malformed(SERVICE, 'analyze did not answer an array of results');
        for (const h of hits) {
          if ((actions.get(h.entity_type) ?? row.default_action) === 'block') {
            return { kind: 'block', reason: `presidio entity ${h.entity_type}` };
          }
        }
        found.push(hits.length > 0 ? hits : undefined);
      }
      if (found.every((h) => h === undefined)) return ALLOW;
      const counts: Record<string, number> = {};
      const texts: string[] = [];
      for (let i = 0; i < segments.length; i++) {
        const hits = found[i];
        if (!hits) {
          texts.push(segments[i]!.text);
          continue;
        }
        const r = await call(ctx, anonymize, {
          text: segments[i]!.text,
          analyzer_results: hits,
          anonymizers: { DEFAULT: OPERATORS[row.operator] },
        });
        if (!r.ok) return { kind: 'unavailable', tag: r.tag, reason: r.reason };
        if (!isRecord(r.body) || typeof r.body.text !== 'string') return malformed(SERVICE, 'anonymize gave no `text`');
        texts.push(r.body.text);
        const items = Array.isArray(r.body.items) ? r.body.items : [];
        for (const it of items) {
          const t = isRecord(it) && typeof it.entity_type === 'string' ? it.entity_type : 'UNKNOWN';
          counts[t] = (counts[t] ?? 0) + 1;
        }
      }
      return { kind: 'mask', texts, counts };
    },
  };
}
