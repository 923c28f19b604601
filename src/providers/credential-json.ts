// The JSON document some families pack into a provider key's `api_key` (Bedrock's access keys, Vertex's
// project and service account, Azure's AAD app), read once per key object: a snapshot's keys never change,
// so a rotated credential is a new key object and is read afresh.

const parsed = new WeakMap<object, Record<string, unknown> | undefined>();

/** `api_key` as a JSON object, or undefined when it is not one (never the parser's words: they quote bytes). */
export function credentialJson(key: { api_key?: string }): Record<string, unknown> | undefined {
  if (parsed.has(key)) return parsed.get(key);
  const v = parseObject(key.api_key);
  parsed.set(key, v);
  return v;
}

function parseObject(text: string | undefined): Record<string, unknown> | undefined {
  if (!text || !text.trim().startsWith('{')) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A member that must be a non-empty string. */
export function stringMember(o: Record<string, unknown>, name: string): string | undefined {
  const v = o[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** Members that hold or identify a secret, at the top level or inside a service-account key file. */
const SECRET_MEMBERS = [
  'access_key_id',
  'secret_access_key',
  'session_token',
  'access_token',
  'client_id',
  'client_secret',
  'private_key',
  'private_key_id',
];

/**
 * The secret members of a JSON credential in `api_key`, for the scrubber: an upstream that echoes one
 * echoes the member, never the whole document. Empty for a plain key.
 */
export function credentialSecrets(apiKey: string): string[] {
  const doc = parseObject(apiKey);
  if (!doc) return [];
  const out: string[] = [];
  const collect = (o: Record<string, unknown>) => {
    for (const m of SECRET_MEMBERS) if (typeof o[m] === 'string' && o[m] !== '') out.push(o[m] as string);
  };
  collect(doc);
  const sa = doc.service_account_json;
  if (typeof sa === 'object' && sa !== null && !Array.isArray(sa)) collect(sa as Record<string, unknown>);
  return out;
}
