// One row per guardrail of the served snapshot for the status page (docs/operations.md "The status page"):
// what it checks and how it fails, with the results counted since start.
import { evaluationOrder } from '../guardrails/attachments.ts';
import type { GuardrailMetrics, GuardrailResult } from '../observability/guardrail-metrics.ts';
import type { Snapshot } from '../resources/snapshot.ts';

export interface GuardrailStatusRow {
  name: string;
  id: string;
  kind: string;
  /** `input`, `output`, `input, output`, or `disabled` (a disabled or inert row). */
  hooks: string;
  mode: 'block' | 'monitor';
  /** The remote kinds' failure policy, e.g. `input open · output closed`; `mandatory`. */
  failure: string | undefined;
  /** Attachment rows naming it (0: environment-wide). */
  attachments: number;
  results: Partial<Record<GuardrailResult, number>>;
}

const REMOTE = new Set([
  'openai_moderation',
  'presidio',
  'lakera',
  'azure_content_safety',
  'azure_content_safety_text_moderation',
]);

export function guardrailStatusRows(snapshot: Snapshot | undefined, metrics?: GuardrailMetrics): GuardrailStatusRow[] {
  if (!snapshot) return [];
  const attached = new Map<string, number>();
  for (const a of snapshot.guardrailAttachments) attached.set(a.guardrail_id, (attached.get(a.guardrail_id) ?? 0) + 1);
  return [...snapshot.guardrails].sort(evaluationOrder).map((e) => {
    const g = e.guardrail;
    const hooks = g ? [g.input ? 'input' : '', g.output ? 'output' : ''].filter(Boolean).join(', ') : 'disabled';
    const failure = g && REMOTE.has(g.kind)
      ? g.mandatory
        ? 'mandatory'
        : `input ${g.failOpen ? 'open' : 'closed'} · output ${g.outputFailOpen ? 'open' : 'closed'}`
      : undefined;
    return {
      name: e.name,
      id: e.id,
      kind: g?.kind ?? '—',
      hooks,
      mode: g?.monitor ? 'monitor' : 'block',
      failure,
      attachments: attached.get(e.id) ?? 0,
      results: metrics?.perGuardrail.get(e.name) ?? {},
    };
  });
}
