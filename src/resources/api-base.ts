// A provider key's upstream base URL as the snapshot holds it (docs/configuration.md "Provider keys"): the
// OpenAI and Anthropic default hosts only for their own vendor, so a key is never sent to another vendor.
import type { AdapterName } from './schema.ts';

const OPENAI_DEFAULT = 'https://api.openai.com/v1';
const ANTHROPIC_DEFAULT = 'https://api.anthropic.com';

/** Endpoint suffixes an operator pastes with the base; one is stripped, in this order. */
const OPENAI_ENDPOINT_SUFFIXES = [
  '/chat/completions',
  '/completions',
  '/embeddings',
  '/images/generations',
  '/audio/transcriptions',
  '/audio/translations',
  '/audio/speech',
];

/**
 * The base an adapter appends its paths to, or undefined when the key has none: an absent or blank
 * `api_base` gets the family's default host only when `provider` is empty or the family's own name.
 */
export function resolveApiBase(
  adapter: AdapterName | undefined,
  provider: string,
  apiBase?: string,
): string | undefined {
  const given = apiBase?.trim().replace(/\/+$/, '');
  const vendor = provider.trim().toLowerCase();
  if (adapter === 'openai') {
    if (!given) return vendor === '' || vendor === 'openai' ? OPENAI_DEFAULT : undefined;
    return normaliseOpenAiBase(given);
  }
  if (adapter === 'anthropic') {
    if (!given) return vendor === '' || vendor === 'anthropic' ? ANTHROPIC_DEFAULT : undefined;
    return given.replace(/\/v1\/messages$/, '').replace(/\/v1$/, '');
  }
  return given || undefined;
}

/** One pasted endpoint suffix dropped; `/v1` added only to OpenAI's own bare host. */
function normaliseOpenAiBase(base: string): string {
  let out = base;
  for (const suffix of OPENAI_ENDPOINT_SUFFIXES) {
    if (out.endsWith(suffix)) {
      out = out.slice(0, -suffix.length).replace(/\/+$/, '');
      break;
    }
  }
  return out === 'https://api.openai.com' || out === 'http://api.openai.com' ? `${out}/v1` : out;
}
