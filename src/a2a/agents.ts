// Which agent a request names and whether its key may reach it (docs/a2a.md "Access"): AISIX's lookup (an
// exact name; a disabled agent is absent) and its `allowed_agents` check (single-`*` globs, none = no access).
import type { A2aAgent } from '../resources/a2a-agent.ts';

/** The enabled agent named `name` exactly; the first one when etcd holds two of that name. */
export function servedAgent(agents: readonly A2aAgent[], name: string): A2aAgent | undefined {
  for (const a of agents) if (a.name === name) return a.enabled ? a : undefined;
  return undefined;
}

/** Whether a key's `allowed_agents` lets it reach `agent`: absent, `null` or `[]` reaches none. */
export function agentAllowed(allowed: readonly string[] | undefined, agent: string): boolean {
  if (!allowed) return false;
  for (const p of allowed) if (wildcardMatch(p, agent)) return true;
  return false;
}

/**
 * AISIX's wildcard: `*` alone matches everything, a pattern without `*` matches exactly, one `*` matches any
 * run of characters there; a pattern with two or more `*` matches nothing.
 */
export function wildcardMatch(pattern: string, name: string): boolean {
  const star = pattern.indexOf('*');
  if (star < 0) return pattern === name;
  if (pattern.indexOf('*', star + 1) >= 0) return false;
  const head = pattern.slice(0, star);
  const tail = pattern.slice(star + 1);
  return name.length >= head.length + tail.length && name.startsWith(head) && name.endsWith(tail);
}
