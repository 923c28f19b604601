// Which `cache_policies` document answers a request, and what the caller's `Cache-Control` asks
// (docs/cache.md "Policies", "Headers and directives"): the first enabled policy, in the snapshot's order, whose
// `applies_to` matches wins; `model:<name>` is the name the caller sent (no globbing), `api_key:<id>` the
// caller's key id, anything else matches every request (AISIX parses it as `all`).
import type { CachePolicy } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';

/** The policies of one snapshot, indexed for the per-request choice. */
export class PolicyTable {
  /** Enabled policies only, in the snapshot's order, each with its parsed `applies_to`. */
  private readonly rules: { policy: CachePolicy; model?: string; apiKey?: string }[] = [];

  constructor(policies: readonly CachePolicy[]) {
    for (const p of policies) {
      if (!p.enabled) continue;
      const a = p.applies_to;
      if (a.startsWith('model:') && a.length > 6) this.rules.push({ policy: p, model: a.slice(6) });
      else if (a.startsWith('api_key:') && a.length > 8) this.rules.push({ policy: p, apiKey: a.slice(8) });
      else this.rules.push({ policy: p });
    }
  }

  /** No enabled policy: the cache has nothing to do for this snapshot. */
  get empty(): boolean {
    return this.rules.length === 0;
  }

  /** The first enabled policy matching the model name the caller sent and its key id. */
  match(model: string, apiKeyId: string): CachePolicy | undefined {
    for (const r of this.rules) {
      if (r.model !== undefined ? r.model === model : r.apiKey === undefined || r.apiKey === apiKeyId) {
        return r.policy;
      }
    }
    return undefined;
  }
}

const tables = new WeakMap<Snapshot, PolicyTable>();

/** The snapshot's policy table, built on first use and kept as long as the snapshot lives. */
export function policyTable(snapshot: Snapshot): PolicyTable {
  let t = tables.get(snapshot);
  if (!t) {
    t = new PolicyTable(snapshot.cachePolicies);
    tables.set(snapshot, t);
  }
  return t;
}

/** The request's `Cache-Control`: `no-cache` skips both reads (and refreshes), `no-store` skips both writes. */
export interface Directives {
  noCache: boolean;
  noStore: boolean;
}

const NONE: Directives = { noCache: false, noStore: false };

/** Comma-separated tokens, case-insensitive, exact token only (`no-cache=x` does not count). */
export function parseDirectives(header: string | null): Directives {
  if (header === null || header === '') return NONE;
  let noCache = false;
  let noStore = false;
  for (const raw of header.split(',')) {
    const t = raw.trim().toLowerCase();
    if (t === 'no-cache') noCache = true;
    else if (t === 'no-store') noStore = true;
  }
  return noCache || noStore ? { noCache, noStore } : NONE;
}
