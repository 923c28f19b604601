// A `rate_limit_policies` document on either path (docs/rate-limit-policies.md): an etcd row read leniently, or
// a resources-file entry read strictly after its names are resolved to ids (AISIX's desugar: `scope_ref` of an
// `api_key` / `model` scope, and condition leaves on those dimensions).
import { parseAgainst } from './documents.ts';
import { type ConditionNode, type RateLimitPolicy, RateLimitPolicySchema, toPolicy } from './policy-schema.ts';

export type ParsedPolicy =
  | { ok: true; resource: RateLimitPolicy; ignored: string[] }
  | { ok: false; errorKind: 'schema_failed'; error: string };

export function parsePolicyDocument(
  id: string,
  doc: Record<string, unknown>,
  mode: 'strict' | 'lenient',
): ParsedPolicy {
  const r = parseAgainst(RateLimitPolicySchema, doc, mode);
  if (!r.ok) return { ok: false, errorKind: 'schema_failed', error: r.error };
  return { ok: true, resource: toPolicy(id, r.data), ignored: r.ignored };
}

/** Names → ids of one kind of the file's entries; `hasId`: whether `id` is one of those ids. */
export interface NameIds extends ReadonlyMap<string, string> {
  hasId(id: string): boolean;
}

/** Names → ids of the file's api keys and models. */
export interface FileIds {
  api_keys: NameIds;
  models: NameIds;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Rewrites, in place, the names a file policy references into the derived ids; returns the first error (an
 * unknown name, with the candidates), if any.
 */
export function desugarPolicy(doc: Record<string, unknown>, ids: FileIds): string | undefined {
  const resolve = (kind: 'api_keys' | 'models', name: unknown, where: string): string | { error: string } => {
    if (typeof name !== 'string') return name as string; // the schema reports the type
    const id = ids[kind].get(name);
    if (id !== undefined) return id;
    const names = [...ids[kind].keys()].sort();
    return {
      error: `${where} references unknown ${kind === 'models' ? 'model' : 'api key'} ${JSON.stringify(name)} (${
        names.length === 0 ? `no ${kind} are defined in this file` : `defined ${kind}: ${names.join(', ')}`
      })`,
    };
  };
  if (doc.scope === 'api_key' || doc.scope === 'model') {
    const r = resolve(doc.scope === 'model' ? 'models' : 'api_keys', doc.scope_ref, '`scope_ref`');
    if (typeof r === 'object' && r !== null) return r.error;
    doc.scope_ref = r;
  }
  let error: string | undefined;
  const walk = (n: unknown): void => {
    if (!isRecord(n) || error) return;
    if (Array.isArray(n.children)) return n.children.forEach(walk);
    if (n.dimension !== 'api_key' && n.dimension !== 'model') return;
    const kind = n.dimension === 'model' ? 'models' : 'api_keys';
    const one = (v: unknown) => {
      const r = resolve(kind, v, `a \`${n.dimension}\` condition`);
      if (typeof r === 'object' && r !== null) error ??= r.error;
      return r;
    };
    n.value = Array.isArray(n.value) ? n.value.map(one) : one(n.value);
  };
  if (Array.isArray(doc.conditions)) (doc.conditions as ConditionNode[]).forEach(walk);
  return error;
}
