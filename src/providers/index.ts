// Adapter lookup by name: the only place that knows which adapters exist.
import type { AdapterName } from '../resources/schema.ts';
import { anthropicAdapter } from './anthropic.ts';
import { echoAdapter } from './echo.ts';
import { openaiAdapter } from './openai.ts';
import type { ProviderAdapter } from './types.ts';

const ADAPTERS: Partial<Record<AdapterName, ProviderAdapter>> = {
  openai: openaiAdapter,
  anthropic: anthropicAdapter,
  echo: echoAdapter,
};

export function adapterFor(name: AdapterName): ProviderAdapter | undefined {
  return ADAPTERS[name];
}
