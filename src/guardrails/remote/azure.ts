// Azure AI Content Safety (docs/guardrails.md): `azure_content_safety` is Prompt Shields (text:shieldPrompt,
// any chunk with `attackDetected` blocks); `azure_content_safety_text_moderation` is text:analyze (a category
// at or over its severity threshold, or a blocklist hit, blocks). Texts over 10 000 characters go in chunks
// split on whitespace.
import type { Built } from '../keyword.ts';
import type { AzurePromptShieldRow, AzureTextModerationRow } from '../schema.ts';
import { ALLOW, type CheckContext, type Hook, joined, type Outcome, type Segment } from '../types.ts';
import { callJson, isRecord, join, malformed } from './http.ts';

const SERVICE = 'azure_cs';
const API_VERSION = '2024-09-01';
const MAX_CHARS = 10_000;

/** Pieces of at most `max` characters, cut at the last whitespace before the limit when there is one. */
export function chunks(text: string, max = MAX_CHARS): string[] {
  const out: string[] = [];
  let rest = text;
  while (rest.length > max) {
    let cut = rest.lastIndexOf(' ', max);
    if (cut <= 0) cut = max;
    out.push(rest.slice(0, cut));
    rest = rest.slice(cut).replace(/^\s+/, '');
  }
  if (rest !== '' || out.length === 0) out.push(rest);
  return out;
}

type Check = (s: readonly Segment[], hook: Hook, ctx: CheckContext) => Promise<Outcome>;

export function buildPromptShield(row: AzurePromptShieldRow): Built<Check> {
  const url = join(row.endpoint, `/contentsafety/text:shieldPrompt?api-version=${API_VERSION}`);
  return {
    ok: true,
    value: async (segments, _hook, ctx) => {
      for (const piece of chunks(joined(segments))) {
        const r = await callJson(ctx, {
          service: SERVICE,
          url,
          headers: { 'ocp-apim-subscription-key': row.api_key },
          body: { userPrompt: piece, documents: [] },
          timeoutMs: row.timeout_ms,
        });
        if (!r.ok) return { kind: 'unavailable', tag: r.tag, reason: r.reason };
        if (!isRecord(r.body) || !isRecord(r.body.userPromptAnalysis)) {
          return malformed(SERVICE, 'no `userPromptAnalysis`');
        }
        if (r.body.userPromptAnalysis.attackDetected === true) {
          return { kind: 'block', reason: 'azure prompt shield detected an attack' };
        }
      }
      return ALLOW;
    },
  };
}

export function buildTextModeration(row: AzureTextModerationRow): Built<Check> {
  const url = join(row.endpoint, `/contentsafety/text:analyze?api-version=${API_VERSION}`);
  const threshold = (cat: string) =>
    (row.severity_threshold_by_category as Record<string, number | undefined>)[cat] ?? row.severity_threshold;
  return {
    ok: true,
    value: async (segments, hook, ctx) => {
      const source = hook === 'input' && row.text_source === 'concatenate_user_content'
        ? segments.filter((s) => s.role === 'user')
        : segments;
      const text = joined(source);
      if (text.trim() === '') return ALLOW;
      for (const piece of chunks(text)) {
        const r = await callJson(ctx, {
          service: SERVICE,
          url,
          headers: { 'ocp-apim-subscription-key': row.api_key },
          body: {
            text: piece,
            categories: row.categories,
            blocklistNames: row.blocklist_names,
            haltOnBlocklistHit: row.halt_on_blocklist_hit,
            outputType: row.output_type,
          },
          timeoutMs: row.timeout_ms,
        });
        if (!r.ok) return { kind: 'unavailable', tag: r.tag, reason: r.reason };
        if (!isRecord(r.body) || !Array.isArray(r.body.categoriesAnalysis)) {
          return malformed(SERVICE, 'no `categoriesAnalysis` array');
        }
        const over: string[] = [];
        for (const c of r.body.categoriesAnalysis) {
          if (isRecord(c) && typeof c.category === 'string' && typeof c.severity === 'number') {
            if (c.severity >= threshold(c.category)) over.push(`${c.category}=${c.severity}`);
          }
        }
        const blocklist = Array.isArray(r.body.blocklistsMatch) && r.body.blocklistsMatch.length > 0;
        if (over.length > 0 || blocklist) {
          return { kind: 'block', reason: `azure text moderation: ${blocklist ? 'blocklist match' : over.join(', ')}` };
        }
      }
      return ALLOW;
    },
  };
}
