// The desugar stage of the resources-file pipeline (docs/configuration.md "resources.yaml"): the file's
// conveniences rewritten into the canonical document AISIX's strict schema checks. Each returns the
// entry's error, if any, and rewrites the document in place otherwise.
import { sha256Hex } from '../util/crypto.ts';
import type { Env } from './interpolate.ts';

/**
 * `models[].provider_key` and a semantic router's `semantic.classifier.provider_key` (a provider key's name)
 * → `provider_key_id`. Returns the error, if any.
 */
export function desugarModel(
  doc: Record<string, unknown>,
  providerKeyIds: ReadonlyMap<string, string>,
): string | undefined {
  const semantic = doc.semantic as { classifier?: unknown } | null | undefined;
  const classifier = semantic?.classifier;
  if (classifier !== null && typeof classifier === 'object' && !Array.isArray(classifier)) {
    const error = providerKeyRef(classifier as Record<string, unknown>, providerKeyIds);
    if (error !== undefined) return `semantic.classifier: ${error}`;
  }
  return providerKeyRef(doc, providerKeyIds);
}

function providerKeyRef(doc: Record<string, unknown>, providerKeyIds: ReadonlyMap<string, string>): string | undefined {
  if (!('provider_key' in doc)) return undefined;
  const name = doc.provider_key;
  if (typeof name !== 'string') return '`provider_key` must be a string (a provider key display_name)';
  if ('provider_key_id' in doc) {
    return '`provider_key` (a name reference) and `provider_key_id` are mutually exclusive — set exactly one';
  }
  const id = providerKeyIds.get(name);
  if (id === undefined) {
    const names = [...providerKeyIds.keys()].sort();
    const known = names.length === 0
      ? 'no provider_keys are defined in this file'
      : `defined provider_keys: ${names.join(', ')}`;
    return `\`provider_key\` references unknown provider key ${JSON.stringify(name)} (${known})`;
  }
  delete doc.provider_key;
  doc.provider_key_id = id;
  return undefined;
}

/** `api_keys[].key_env` (the name of a variable holding the plaintext key) → `key_hash`; exactly one of them. */
export function desugarApiKey(
  doc: Record<string, unknown>,
  env: Env,
): string | undefined | Promise<string | undefined> {
  const hasEnv = 'key_env' in doc;
  const hasHash = 'key_hash' in doc;
  if (hasEnv && hasHash) return '`key_env` and `key_hash` are mutually exclusive — set exactly one';
  if (!hasEnv && !hasHash) {
    return 'one of `key_env` (environment variable holding the plaintext key) or `key_hash` (SHA-256 hex of the plaintext) is required';
  }
  if (!hasEnv) return undefined;
  const name = doc.key_env;
  if (typeof name !== 'string' || name === '') {
    return '`key_env` must be a non-empty string (an environment variable name)';
  }
  const plaintext = env[name];
  if (plaintext === undefined || plaintext === '') {
    return `\`key_env\` environment variable \`${name}\` is unset or empty`;
  }
  delete doc.key_env;
  // A promise only here: a file of a million `key_hash` rows makes none.
  return sha256Hex(plaintext).then((hash) => {
    doc.key_hash = hash;
    return undefined;
  });
}
