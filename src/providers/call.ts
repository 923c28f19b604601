// The one way the core calls an adapter: straight through when the adapter speaks the caller's endpoint,
// through a translation when it does not (translate/via-chat.ts: a `/v1/messages` or `/v1/responses` caller
// reaching a chat target), and a refusal (a 400 in the caller's wire) when the target cannot serve the
// endpoint at all (e.g. embeddings on an Anthropic key). Routing and handlers never know which of these
// happened. Upstream error answers come back as the upstream sent them: the HTTP layer re-wraps them
// (src/http/errors.ts). Every answer names the model the caller sent (caller-model.ts); an embeddings
// answer states both usage counters (embeddings-usage.ts).
import { answerStreamWithCallerModel, streamWithCallerModel, withCallerModel } from './caller-model.ts';
import { withEmbeddingUsage } from './embeddings-usage.ts';
import { isMediaEndpoint } from './media.ts';
import { translatedCall } from './translate/via-chat.ts';
import type { ProviderAdapter, ProviderCall, ProviderResult } from './types.ts';

/** Not an async function: the adapter's answer is edited in one `then`, without a frame and an await around it. */
export function callProvider(adapter: ProviderAdapter, call: ProviderCall): Promise<ProviderResult> {
  try {
    const translated = translatedCall(adapter, call);
    if (translated) return translated;
    if (!adapter.supports(call.endpoint)) {
      const message = `this model (adapter "${adapter.name}") does not serve ${call.endpoint}`;
      return Promise.resolve({ kind: 'refused', message });
    }
    return adapter.call(call).then((r) => answerOf(r, call));
  } catch (e) {
    return Promise.reject(e);
  }
}

/** The adapter's answer as the caller gets it: usage stated, the caller's model named. */
function answerOf(r: ProviderResult, call: ProviderCall): ProviderResult {
  const answered = call.endpoint === 'embeddings' ? withEmbeddingUsage(r) : r;
  // Legacy completions pass through as AISIX passes them (test/conformance/surface.test.ts).
  if (call.endpoint === 'count_tokens' || call.endpoint === 'completions' || call.callerModel === undefined) {
    return answered;
  }
  // Audio, images and rerank answers are relayed: only one that names a model gets the caller's instead.
  if (isMediaEndpoint(call.endpoint)) {
    return namesModel(answered) ? namingCallerModel(answered, call, call.callerModel) : answered;
  }
  return namingCallerModel(answered, call, call.callerModel);
}

/**
 * An answer naming the caller's model: at the top level of a JSON answer and of chat chunks, in the answer
 * object of a Messages or Responses stream's events. On a stream the splice joins the adapter's own edits
 * before the stream is read (one pass over each chunk: sse-edit.ts); an error answer is left as the upstream
 * sent it.
 */
function namingCallerModel(r: ProviderResult, call: ProviderCall, model: string): ProviderResult {
  if (r.kind === 'stream') {
    const nested = call.endpoint === 'messages' || call.endpoint === 'responses';
    const chunks = nested
      ? answerStreamWithCallerModel(r.chunks, model, call.maxSseEventBytes)
      : streamWithCallerModel(r.chunks, model, call.maxSseEventBytes);
    return { ...r, chunks };
  }
  if (r.kind === 'response' && r.status >= 200 && r.status < 300) {
    return { ...r, body: withCallerModel(r.body, model) };
  }
  return r;
}

/** A whole 2xx JSON answer with a top-level `model` member. */
function namesModel(r: ProviderResult): boolean {
  if (r.kind !== 'response' || r.status < 200 || r.status >= 300 || !r.body.includes('"model"')) return false;
  try {
    const v: unknown = JSON.parse(r.body);
    return typeof v === 'object' && v !== null && !Array.isArray(v) && 'model' in v;
  } catch {
    return false;
  }
}
