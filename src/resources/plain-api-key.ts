// The common api key document, read without the schema (docs/performance.md "Configuration at scale"): a SaaS
// issues a key per user, so a prefix may hold millions of `{display_name, key_hash, allowed_models}` rows. A
// document of that plain shape is one the schema accepts, and it yields the same resource (members in the
// schema's order) and the same canonical text; anything else is left to the schema, so every verdict and
// message stays the schema's.
import type { ApiKey } from './schema.ts';

/** The members a plain document may have; any other member (or a null) goes to the schema. */
const PLAIN = new Set(['display_name', 'key_hash', 'allowed_models', 'disabled']);

/** Whether `doc` is a plain api key document the schema accepts as is (no member dropped, none defaulted but `disabled`). */
export function isPlainApiKey(doc: Record<string, unknown>): boolean {
  for (const k of Object.keys(doc)) if (!PLAIN.has(k)) return false;
  const { display_name, key_hash, allowed_models, disabled } = doc;
  if (typeof key_hash !== 'string' || key_hash.length === 0) return false;
  if (display_name !== undefined && typeof display_name !== 'string') return false;
  if (disabled !== undefined && typeof disabled !== 'boolean') return false;
  if (!Array.isArray(allowed_models)) return false;
  for (const m of allowed_models) if (typeof m !== 'string' || m.length === 0) return false;
  return true;
}

/** Equal `allowed_models` lists, one array each (most keys of a prefix name the same few models), and their JSON. */
const lists = new Map<string, string[]>();
const listJson = new WeakMap<readonly string[], string>();
const MAX_LISTS = 1024;

/** The shared one-model lists by their model: most keys name one, and a lookup by it makes no JSON. */
const singles = new Map<string, string[]>();

function sharedList(list: string[]): string[] {
  const single = list.length === 1 ? singles.get(list[0]!) : undefined;
  if (single !== undefined) return single;
  const json = JSON.stringify(list);
  const known = lists.get(json);
  if (known !== undefined) return known;
  if (lists.size < MAX_LISTS && list.length <= 16) {
    // Read back from its JSON: names of their own, not slices of the text they were parsed from (below).
    const own = JSON.parse(json) as string[];
    lists.set(json, own);
    listJson.set(own, json);
    if (own.length === 1) singles.set(own[0]!, own);
    return own;
  }
  return list;
}

/** The resource the schema reads from a plain document (`isPlainApiKey`), `id` last as `withId` sets it. */
export function plainApiKey(id: string, doc: Record<string, unknown>): ApiKey {
  const display_name = doc.display_name as string | undefined;
  const key_hash = doc.key_hash as string;
  const list = doc.allowed_models as string[];
  const allowed_models = sharedList(list);
  const disabled = (doc.disabled as boolean | undefined) ?? false;
  // Two literals, so every key has one of two hidden classes and no out-of-object members.
  return display_name === undefined
    ? { key_hash, allowed_models, disabled, id }
    : { display_name, key_hash, allowed_models, disabled, id };
}

/**
 * `canonicalJson(doc)` of a plain document (`isPlainApiKey`); also the text of a resource read from one
 * (`plainApiKey`), whose `disabled` is in the text only when the document had it (`withDisabled`). Made for each
 * pass of the hashes over every row, so the JSON of a shared model list is not made again.
 */
export function plainApiKeyText(
  doc: { allowed_models?: unknown; disabled?: unknown; display_name?: unknown; key_hash?: unknown },
  withDisabled = doc.disabled !== undefined,
): string {
  const list = doc.allowed_models as string[];
  const models = listJson.get(list) ?? JSON.stringify(list);
  // canonicalJson's member order: allowed_models, disabled, display_name, key_hash. One template, each string
  // quoted in place when JSON would write it as it is: the hashes make this text for every row on each pass.
  const disabled = withDisabled ? `,"disabled":${doc.disabled}` : '';
  const name = doc.display_name as string | undefined;
  const hash = doc.key_hash as string;
  if (name === undefined) {
    return AS_IS.test(hash)
      ? `{"allowed_models":${models}${disabled},"key_hash":"${hash}"}`
      : `{"allowed_models":${models}${disabled},"key_hash":${JSON.stringify(hash)}}`;
  }
  return AS_IS.test(name) && AS_IS.test(hash)
    ? `{"allowed_models":${models}${disabled},"display_name":"${name}","key_hash":"${hash}"}`
    : `{"allowed_models":${models}${disabled},"display_name":${JSON.stringify(name)},"key_hash":${
      JSON.stringify(hash)
    }}`;
}

/** Strings JSON writes as they are between its quotes: printable ASCII but `"` and `\`. */
const AS_IS = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * Whether `k` is the resource `plainApiKey(k.id, doc)` would make: a reload keeps the serving snapshot's resource
 * for a row that did not change, so the new snapshot allocates only for the rows that did. `k`'s members are
 * counted too: a resource the schema read from a richer document never stands for a plain one.
 */
export function isSamePlainApiKey(k: ApiKey, doc: Record<string, unknown>): boolean {
  if (!isPlainApiKey(doc)) return false;
  if (k.key_hash !== doc.key_hash || k.display_name !== doc.display_name) return false;
  if (k.disabled !== ((doc.disabled as boolean | undefined) ?? false)) return false;
  const list = doc.allowed_models as string[];
  const kept = k.allowed_models;
  if (kept === undefined || kept.length !== list.length) return false;
  for (let i = 0; i < list.length; i++) if (kept[i] !== list[i]) return false;
  let members = 0;
  for (const _ in k) members++;
  return members === (doc.display_name === undefined ? 4 : 5);
}
