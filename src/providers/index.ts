// Adapter lookup by name: the only place that knows which adapters exist.
import type { AdapterName } from '../resources/schema.ts';
import { anthropicAdapter } from './anthropic.ts';
import { azureOpenAiAdapter } from './azure.ts';
import { bedrockAdapter } from './bedrock/adapter.ts';
import { echoAdapter } from './echo.ts';
import { invalidConfig } from './failures.ts';
import { openaiAdapter } from './openai.ts';
import { withVendorQuirks } from './openai-quirks.ts';
import type { ProviderAdapter } from './types.ts';
import { vertexAdapter } from './vertex/adapter.ts';

/**
 * An adapter whose key must name its upstream: a key of another vendor has no default base (the OpenAI
 * and Anthropic hosts are only their own vendors'), so it is refused before anything is sent.
 */
function needsBase(adapter: ProviderAdapter): ProviderAdapter {
  return {
    name: adapter.name,
    supports: adapter.supports,
    call: (c) =>
      c.key.api_base ? adapter.call(c) : Promise.resolve(
        invalidConfig(`provider_key for vendor "${c.key.provider}" has no upstream base URL configured`),
      ),
  };
}

/**
 * The adapter of a key of another vendor that names none: every call refused with AISIX's 503
 * `provider_unavailable`, nothing sent anywhere.
 */
const unboundAdapter: ProviderAdapter = {
  name: 'openai',
  supports: () => true,
  call: () => Promise.resolve({ kind: 'refused', message: 'no bridge registered for provider', unavailable: true }),
};

const ADAPTERS: Record<AdapterName, ProviderAdapter> = {
  openai: needsBase(withVendorQuirks(openaiAdapter)),
  anthropic: needsBase(anthropicAdapter),
  bedrock: bedrockAdapter,
  vertex: vertexAdapter,
  'azure-openai': azureOpenAiAdapter,
  echo: echoAdapter,
};

/** The adapter of a key's `adapter`; undefined (a vendor that names none) gets one that refuses every call. */
export function adapterFor(name: AdapterName | undefined): ProviderAdapter {
  return name === undefined ? unboundAdapter : ADAPTERS[name];
}
