// The resources file's usual api key row read without its zod schema (docs/performance.md "Configuration at
// scale"): a file of a million keys is a million rows of `display_name`, `key_hash` and `allowed_models`, and
// checking each through the schema was the load's largest cost after the YAML. A row of any other shape, or
// with a value the schema might refuse, returns undefined and goes through the schema as before.
import type { ApiKey } from './schema.ts';

const isText = (v: unknown): v is string => typeof v === 'string' && v !== '';

/**
 * The api key the strict schema would read from `doc` (the same members in the same order), when `doc` has only
 * `display_name` (a string), `key_hash` and `allowed_models` (non-empty strings) and `disabled` (a boolean).
 */
export function plainApiKey(id: string, doc: Record<string, unknown>): ApiKey | undefined {
  let members = 0;
  const { display_name, key_hash, allowed_models, disabled } = doc;
  if (display_name !== undefined) {
    if (typeof display_name !== 'string') return undefined;
    members++;
  }
  if (!isText(key_hash) || !Array.isArray(allowed_models)) return undefined;
  members += 2;
  for (const m of allowed_models) if (!isText(m)) return undefined;
  if (disabled !== undefined) {
    if (typeof disabled !== 'boolean') return undefined;
    members++;
  }
  let own = 0;
  for (const _ in doc) own++;
  if (own !== members || Object.getPrototypeOf(doc) !== Object.prototype) return undefined;
  const key: ApiKey = display_name === undefined
    ? { key_hash, allowed_models, disabled: disabled ?? false, id }
    : { display_name, key_hash, allowed_models, disabled: disabled ?? false, id };
  return key;
}
