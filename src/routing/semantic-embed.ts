// The embedding call semantic routing makes (docs/routing.md "Semantic routing"): one batched request to the
// router's embedding model through the gateway's own dispatch, so the model's provider key, deadlines and
// deployment metrics apply as to any call of it.
import { Cancel } from '../util/cancel.ts';
import type { Dispatcher } from './dispatch.ts';
import type { EmbedTexts } from './semantic.ts';

export function embedTextsThrough(dispatcher: Pick<Dispatcher, 'dispatch'>): EmbedTexts {
  return async ({ snapshot, model, input, dimensions, timeoutMs }) => {
    const cancel = new Cancel();
    const timer = timeoutMs > 0 ? setTimeout(() => cancel.abort(new Error('embedding timeout')), timeoutMs) : undefined;
    try {
      const r = await dispatcher.dispatch({
        snapshot,
        model,
        endpoint: 'embeddings',
        body: { model: model.display_name, input, encoding_format: 'float', dimensions },
        stream: false,
        signal: cancel,
      });
      if (r.kind !== 'response' || r.status >= 300) {
        throw new Error(r.kind === 'response' ? `the embedding model answered ${r.status}` : `embedding ${r.kind}`);
      }
      const data = (JSON.parse(r.body) as { data?: { index?: unknown; embedding?: unknown }[] }).data;
      if (!Array.isArray(data)) throw new Error('no embeddings in the answer');
      const ordered = [...data].sort((a, b) => Number(a?.index ?? 0) - Number(b?.index ?? 0));
      return ordered.map((d) => {
        const v = d?.embedding;
        if (!Array.isArray(v) || !v.every((x) => typeof x === 'number')) {
          throw new Error('embedding endpoint returned a vector that is not a float array');
        }
        return v as number[];
      });
    } finally {
      clearTimeout(timer);
    }
  };
}
