// An embeddings answer's `usage` as AISIX restates it (docs/aisix-compatibility.md "Translation and token
// accounting"): both `prompt_tokens` and `total_tokens` always present, a missing one 0 (an upstream that
// reports only `total_tokens` answers `prompt_tokens: 0`). The bytes stay as they came when both are there.
import { isRecord, parseJsonObject } from './translate/shared.ts';
import type { ProviderResult } from './types.ts';

const COUNTERS = ['prompt_tokens', 'total_tokens'] as const;

export function withEmbeddingUsage(r: ProviderResult): ProviderResult {
  if (r.kind !== 'response' || r.status < 200 || r.status >= 300) return r;
  // Cheap test first: the common answer names both counters and is passed on untouched.
  if (COUNTERS.every((k) => r.body.includes(`"${k}"`))) return r;
  const json = parseJsonObject(r.body);
  if (!json) return r; // not JSON: routing's check fails it
  const usage = isRecord(json.usage) ? { ...json.usage } : {};
  for (const k of COUNTERS) if (typeof usage[k] !== 'number') usage[k] = 0;
  return { ...r, body: JSON.stringify({ ...json, usage }) };
}
