// Which tools a caller may see and call (docs/mcp.md "Access control"): AISIX's three allow layers — the
// environment's policy, the key's team's policy, the key's own `mcp_access` — plus, for an anonymous caller, a
// ceiling of its entry's servers. A tool needs every present layer's allow and no deny; no layer at all grants
// nothing. Names are always `<server>__<tool>`, on both endpoints.
import type { McpAccess, McpPolicy } from '../resources/mcp-schema.ts';

/**
 * AISIX's single-`*` glob: no `*` is an exact match, one `*` anchors a prefix and a suffix, two or more match
 * nothing. Case-sensitive; no other wildcard.
 */
export function globMatch(pattern: string, name: string): boolean {
  const star = pattern.indexOf('*');
  if (star < 0) return pattern === name;
  if (pattern.indexOf('*', star + 1) >= 0) return false;
  const prefix = pattern.slice(0, star);
  const suffix = pattern.slice(star + 1);
  return name.length >= prefix.length + suffix.length && name.startsWith(prefix) && name.endsWith(suffix);
}

/** One allow layer: `"*"` among its entries admits everything; `[]` admits nothing. */
function admits(allow: readonly string[], name: string): boolean {
  return allow.includes('*') || allow.some((p) => globMatch(p, name));
}

/** The caller's tool ACL for one request. */
export class ToolAcl {
  constructor(
    private readonly layers: readonly (readonly string[])[],
    private readonly deny: readonly string[],
  ) {}

  /** Whether `name` (`<server>__<tool>`) may be listed and called. */
  permits(name: string): boolean {
    if (this.layers.length === 0) return false;
    for (const allow of this.layers) if (!admits(allow, name)) return false;
    return !this.deny.some((p) => globMatch(p, name));
  }
}

/** Who is asking: the key's team and own layer, and an anonymous entry's servers. */
export interface AclSubject {
  team_id?: string;
  mcp_access?: McpAccess;
  /** Set for an anonymous caller: the ceiling `<server>__*` per entry server. */
  anonymousServers?: readonly string[];
}

/**
 * The ACL from every enabled policy row and the key. Per scope the allow side comes from the row with the
 * lowest id (AISIX's tie-break among duplicate rows); the deny side is the union of every applicable row's.
 */
export function resolveAcl(policies: readonly McpPolicy[], who: AclSubject): ToolAcl {
  const layers: (readonly string[])[] = [];
  const deny: string[] = [];
  const applicable = policies
    .filter((p) => p.enabled && (p.scope === 'env' || (who.team_id !== undefined && p.scope_ref === who.team_id)))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (const scope of ['env', 'team'] as const) {
    const first = applicable.find((p) => p.scope === scope);
    if (first) layers.push(first.allow);
  }
  for (const p of applicable) deny.push(...p.deny);
  if (who.mcp_access) {
    layers.push(who.mcp_access.allow);
    deny.push(...(who.mcp_access.deny ?? []));
  }
  if (who.anonymousServers) layers.push(who.anonymousServers.map((s) => `${s}__*`));
  return new ToolAcl(layers, deny);
}
