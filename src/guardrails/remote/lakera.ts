// `kind: lakera`: POST {endpoint}/v2/guard with the non-empty segments as messages (docs/guardrails.md). Not
// flagged: allow. Every detected type `pii/*`: the payload spans (code point offsets) are masked as
// `[MASKED <TYPE>]`. Any other detection, or flagged without a breakdown: block.
import type { Built } from '../keyword.ts';
import type { LakeraRow } from '../schema.ts';
import { ALLOW, type CheckContext, type Outcome, type Segment } from '../types.ts';
import { callJson, isRecord, join, malformed } from './http.ts';

const SERVICE = 'lakera';

export function buildLakera(row: LakeraRow): Built<(s: readonly Segment[], ctx: CheckContext) => Promise<Outcome>> {
  const url = join(row.endpoint, '/v2/guard');
  return {
    ok: true,
    value: async (segments, ctx) => {
      const sent: number[] = []; // message index → segment index
      const messages: { role: string; content: string }[] = [];
      segments.forEach((s, i) => {
        if (s.text === '') return;
        sent.push(i);
        messages.push({ role: s.role === 'assistant' ? 'assistant' : 'user', content: s.text });
      });
      if (messages.length === 0) return ALLOW;
      const body: Record<string, unknown> = { messages, payload: true, breakdown: true };
      if (row.project_id !== undefined) body.project_id = row.project_id;
      const r = await callJson(ctx, {
        service: SERVICE,
        url,
        headers: { authorization: `Bearer ${row.api_key}` },
        body,
        timeoutMs: row.timeout_ms,
      });
      if (!r.ok) return { kind: 'unavailable', tag: r.tag, reason: r.reason };
      if (!isRecord(r.body) || typeof r.body.flagged !== 'boolean') return malformed(SERVICE, 'no boolean `flagged`');
      if (!r.body.flagged) return ALLOW;
      const breakdown = Array.isArray(r.body.breakdown) ? r.body.breakdown : [];
      const detected = breakdown.filter((b) => isRecord(b) && b.detected === true).map((b) =>
        String((b as Record<string, unknown>).detector_type)
      );
      if (detected.length === 0) return { kind: 'block', reason: 'flagged by lakera guard' };
      const other = detected.filter((t) => !t.startsWith('pii/'));
      if (other.length > 0) return { kind: 'block', reason: `lakera guard detected ${other.join(', ')}` };
      return maskSpans(segments, sent, Array.isArray(r.body.payload) ? r.body.payload : []);
    },
  };
}

/** Writes `[MASKED <TYPE>]` over every payload span, right to left per message, in code points. */
function maskSpans(segments: readonly Segment[], sent: number[], payload: unknown[]): Outcome {
  const spans = new Map<number, { start: number; end: number; type: string }[]>();
  for (const p of payload) {
    if (!isRecord(p) || typeof p.message_id !== 'number' || typeof p.start !== 'number' || typeof p.end !== 'number') {
      continue;
    }
    const seg = sent[p.message_id];
    if (seg === undefined) continue;
    const type = String(p.detector_type ?? 'pii/unknown').replace(/^pii\//, '').toUpperCase();
    const list = spans.get(seg) ?? [];
    list.push({ start: p.start, end: p.end, type });
    spans.set(seg, list);
  }
  const counts: Record<string, number> = {};
  const texts = segments.map((s, i) => {
    const list = spans.get(i);
    if (!list) return s.text;
    const cps = Array.from(s.text);
    list.sort((a, b) => b.start - a.start);
    for (const sp of list) {
      if (sp.start < 0 || sp.end > cps.length || sp.start >= sp.end) continue;
      cps.splice(sp.start, sp.end - sp.start, `[MASKED ${sp.type}]`);
      counts[sp.type] = (counts[sp.type] ?? 0) + 1;
    }
    return cps.join('');
  });
  if (Object.keys(counts).length === 0) return malformed(SERVICE, 'pii detected without usable payload spans');
  return { kind: 'mask', texts, counts };
}
