// Which guardrails run for a request (docs/guardrails.md "Attachments"): AISIX's attachment index, built once
// per snapshot. Entries match the requested model's id, the caller's key id or team, or the whole
// environment; sorted by priority (higher first), then specificity (api_key > team > model > env), then the
// guardrails' evaluation order; the first entry of a guardrail wins. A guardrail without any attachment row
// applies environment-wide at priority 0; one whose attachments are all disabled applies nowhere.
import type { GuardrailAttachment, GuardrailRow, ScopeType } from './schema.ts';
import type { Guardrail } from './types.ts';

/** A guardrail row as the snapshot holds it: `guardrail` undefined when disabled or inert. */
export interface GuardrailEntry {
  id: string;
  name: string;
  createdAt: string | undefined;
  guardrail: Guardrail | undefined;
  /** The row as parsed (defaults filled), for the admin API's reads; secrets are redacted there. */
  row?: GuardrailRow;
  /** Build warnings to log when a snapshot with the row is applied (`unknown_enforcement_mode`). */
  warnings?: string[];
}

/** The request dimensions attachments select on. */
export interface Scope {
  /** The requested model's row id (a routing group's own id, not the member it dispatches to). */
  modelId: string;
  apiKeyId: string;
  teamId: string | undefined;
  /** A passthrough route's id (its requests name no model). */
  routeId?: string;
  /** An MCP tool call's server row id (its model id is empty): `mcp_server` attachments apply to it. */
  mcpServerId?: string;
}

interface Entry {
  order: number;
  priority: number;
  specificity: number;
  guardrail: Guardrail;
}

const SPECIFICITY: Record<ScopeType, number> = {
  api_key: 4,
  team: 3,
  model: 2,
  mcp_server: 2,
  passthrough_route: 2,
  env: 1,
};

/** created_at oldest first, rows without it after those with it, ties by id. */
export function evaluationOrder(a: GuardrailEntry, b: GuardrailEntry): number {
  if (a.createdAt !== b.createdAt) {
    if (a.createdAt === undefined) return 1;
    if (b.createdAt === undefined) return -1;
    const d = Date.parse(a.createdAt) - Date.parse(b.createdAt);
    if (d !== 0) return d;
  }
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

function compareEntries(a: Entry, b: Entry): number {
  return b.priority - a.priority || b.specificity - a.specificity || a.order - b.order;
}

export type IndexLog = (msg: 'implicitEnv' | 'unknownGuardrail', fields: Record<string, unknown>) => void;

export class AttachmentIndex {
  private readonly env: Entry[] = [];
  private readonly byModel = new Map<string, Entry[]>();
  private readonly byKey = new Map<string, Entry[]>();
  private readonly byTeam = new Map<string, Entry[]>();
  private readonly byRoute = new Map<string, Entry[]>();
  private readonly byMcpServer = new Map<string, Entry[]>();
  /** The chain when only environment-wide entries exist (the common case): no per-request work. */
  private readonly envOnly: readonly Guardrail[] | undefined;
  /** Every guardrail that can run, in evaluation order (the status page lists them). */
  readonly guardrails: readonly Guardrail[];

  constructor(rows: readonly GuardrailEntry[], attachments: readonly GuardrailAttachment[], log?: IndexLog) {
    const sorted = [...rows].sort(evaluationOrder);
    const order = new Map(sorted.map((r, i) => [r.id, { i, r }]));
    const attached = new Set<string>();
    for (const a of attachments) {
      const g = order.get(a.guardrail_id);
      if (!g) {
        log?.('unknownGuardrail', { attachment_id: a.id, guardrail_id: a.guardrail_id });
        continue;
      }
      attached.add(a.guardrail_id);
      if (!a.enabled || !g.r.guardrail) continue;
      const e: Entry = {
        order: g.i,
        priority: a.priority,
        specificity: SPECIFICITY[a.scope_type],
        guardrail: g.r.guardrail,
      };
      const id = a.scope_id ?? '';
      if (a.scope_type === 'env') this.env.push(e);
      else if (id === '') continue;
      else if (a.scope_type === 'model') push(this.byModel, id, e);
      else if (a.scope_type === 'api_key') push(this.byKey, id, e);
      else if (a.scope_type === 'team') push(this.byTeam, id, e);
      else if (a.scope_type === 'passthrough_route') push(this.byRoute, id, e);
      else if (a.scope_type === 'mcp_server') push(this.byMcpServer, id, e);
    }
    for (const [id, { i, r }] of order) {
      if (attached.has(id) || !r.guardrail) continue;
      log?.('implicitEnv', { guardrail: r.name, id });
      this.env.push({ order: i, priority: 0, specificity: SPECIFICITY.env, guardrail: r.guardrail });
    }
    const scoped = this.byModel.size + this.byKey.size + this.byTeam.size + this.byRoute.size +
      this.byMcpServer.size;
    this.envOnly = scoped === 0 ? chainOf(this.env) : undefined;
    this.guardrails = sorted.flatMap((r) => (r.guardrail ? [r.guardrail] : []));
  }

  /** No guardrail can run for any request. */
  get empty(): boolean {
    return this.envOnly !== undefined && this.envOnly.length === 0;
  }

  /** The chain of one request, in the order it runs. */
  resolve(scope: Scope): readonly Guardrail[] {
    if (this.envOnly) return this.envOnly;
    const entries = [...this.env];
    entries.push(...(this.byModel.get(scope.modelId) ?? []));
    entries.push(...(this.byKey.get(scope.apiKeyId) ?? []));
    if (scope.teamId !== undefined) entries.push(...(this.byTeam.get(scope.teamId) ?? []));
    if (scope.routeId !== undefined) entries.push(...(this.byRoute.get(scope.routeId) ?? []));
    if (scope.mcpServerId !== undefined) entries.push(...(this.byMcpServer.get(scope.mcpServerId) ?? []));
    return chainOf(entries);
  }
}

function push(map: Map<string, Entry[]>, id: string, e: Entry): void {
  const list = map.get(id);
  if (list) list.push(e);
  else map.set(id, [e]);
}

function chainOf(entries: Entry[]): Guardrail[] {
  entries.sort(compareEntries);
  const seen = new Set<string>();
  const out: Guardrail[] = [];
  for (const e of entries) {
    if (seen.has(e.guardrail.id)) continue;
    seen.add(e.guardrail.id);
    out.push(e.guardrail);
  }
  return out;
}
