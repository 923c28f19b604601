// The guardrails' part of a request's record (record-facet.ts; docs/guardrails.md "Metrics and logs"): AISIX's
// usage-event guardrail fields, gathered over the request's hooks and written in the access log.
import type { Hit, Verdict } from '../guardrails/chain.ts';
import type { RecordFacet, RecordPart } from './record-facet.ts';

export class GuardrailRecord implements RecordFacet {
  blocked = false;
  bypassed: string | undefined = undefined;
  readonly applied: { kind: string; hook: string }[] = [];
  /** `<hook>\0<name>` of the members already in `applied`. */
  private readonly seen = new Set<string>();
  readonly monitor: Hit[] = [];
  readonly enforced: Hit[] = [];
  readonly counts: Record<string, number> = {};

  /** A chain ran on one hook of the request (a stream: once per checked window). */
  ran(v: Verdict): void {
    if (v.blocked) this.blocked = true;
    this.bypassed ??= v.bypassTag;
    for (const a of v.applied) {
      const key = `${a.hook}\u0000${a.name}`;
      if (this.seen.has(key)) continue;
      this.seen.add(key);
      this.applied.push({ kind: a.kind, hook: a.hook });
    }
    for (const h of v.hits) {
      if (h.action === 'would_block' || h.action === 'would_mask') this.monitor.push(h);
      else this.enforced.push({ ...h, reason: undefined });
    }
    for (const [k, n] of Object.entries(v.counts)) this.counts[k] = (this.counts[k] ?? 0) + n;
  }

  /** AISIX records no provider id for an answer a guardrail refused. */
  get providerCall(): boolean {
    return !this.blocked;
  }

  accessLogValues(): readonly unknown[] {
    return [
      this.blocked,
      this.bypassed,
      this.applied,
      this.monitor.length > 0 ? this.monitor : undefined,
      this.enforced.length > 0 ? this.enforced : undefined,
      Object.keys(this.counts).length > 0 ? this.counts : undefined,
    ];
  }
}

/** Set when a chain ran on a hook of the request, or a stream over its hold-back cap was refused. */
export const GUARDRAIL_RECORD: RecordPart<GuardrailRecord> = {
  name: 'guardrails',
  fields: [
    'guardrail_blocked',
    'guardrail_bypassed_reason',
    'applied_guardrails',
    'guardrail_monitor_hits',
    'guardrail_enforced_hits',
    'redacted_entity_counts',
  ],
  create: () => new GuardrailRecord(),
};
