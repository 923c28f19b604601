// The upstream URL of a direct-HTTP family (audio, image edits, rerank, files, batches: docs/endpoints.md "Path
// parameters and upstream bases"), AISIX's `resolve_base_url` and `build_openai_url`: a pasted endpoint suffix
// is taken off the key's `api_base` once; a base with a path keeps it verbatim (`…/v1`, `…/v2`, `…/api/paas/v4`,
// `…/v1beta/openai`); a bare host gets `/v1`. The chat families keep the adapters' own rule
// (src/resources/api-base.ts), which adds `/v1` only to OpenAI's own bare host: AISIX's two rules differ.
/** Endpoint suffixes a pasted `api_base` may end in (AISIX's list, one taken off). */
const SUFFIXES = [
  '/audio/transcriptions',
  '/audio/translations',
  '/audio/speech',
  '/chat/completions',
  '/images/generations',
  '/completions',
  '/embeddings',
  '/responses',
  '/messages',
  '/rerank',
];

/** The key's base for the direct-HTTP families: `api_base` trimmed, one endpoint suffix off; OpenAI's by default. */
export function directBase(provider: string, apiBase: string | undefined): string | undefined {
  const given = apiBase?.trim().replace(/\/+$/, '');
  if (!given) return provider.trim().toLowerCase() === 'openai' ? 'https://api.openai.com/v1' : undefined;
  const suffix = SUFFIXES.find((s) => given.endsWith(s));
  return suffix ? given.slice(0, -suffix.length).replace(/\/+$/, '') : given;
}

/** `base` + `path` (`/audio/speech`): a base with a path keeps it; a bare host gets `/v1`. */
export function directUrl(base: string, path: string): string {
  const root = base.replace(/\/+$/, '');
  let hasPath = false;
  try {
    hasPath = new URL(root).pathname.replace(/\/+$/, '') !== '';
  } catch { /* not a URL: joined as it is, and the transport refuses it */ }
  return `${root}${hasPath ? '' : '/v1'}${path}`;
}
