// The one way the core calls an adapter: straight through when the adapter speaks the caller's endpoint,
// through a translation when it does not (translate/via-chat.ts: a `/v1/messages` or `/v1/responses` caller
// reaching a chat target), and a refusal (a 400 in the caller's wire) when the target cannot serve the
// endpoint at all (e.g. embeddings on an Anthropic key). Routing and handlers never know which of these
// happened. Upstream error answers come back as the upstream sent them: the HTTP layer re-wraps them
// (src/http/errors.ts).
import { translatedCall } from './translate/via-chat.ts';
import type { ProviderAdapter, ProviderCall, ProviderResult } from './types.ts';

export async function callProvider(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> {
  const translated = translatedCall(adapter, call);
  if (translated) return translated;
  if (adapter.supports(call.endpoint)) return adapter.call(call);
  return { kind: 'refused', message: `this model (adapter "${adapter.name}") does not serve ${call.endpoint}` };
}
