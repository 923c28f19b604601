// The embedding calls the gateway makes for itself (docs/routing.md "Semantic routing", docs/cache.md): one
// request to an embedding model through the gateway's own dispatch, so the model's provider key, deadlines and
// deployment metrics apply as to any call of it. Semantic routing batches its texts; the semantic cache sends one.
import type { DirectModel } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { Cancel } from '../util/cancel.ts';
import type { Dispatcher } from './dispatch.ts';
import type { EmbedTexts } from './semantic.ts';

export function embedTextsThrough(dispatcher: Pick<Dispatcher, 'dispatch'>): EmbedTexts {
  return ({ snapshot, model, input, dimensions, timeoutMs }) =>
    embeddingsThrough(dispatcher, {
      snapshot,
      model,
      timeoutMs,
      body: { model: model.display_name, input, encoding_format: 'float', dimensions },
    });
}

/**
 * One embeddings call through the dispatcher (the model's own upstream), bounded by `timeoutMs` (0: none): the
 * vectors in input order; any answer but float vectors is a throw.
 */
export async function embeddingsThrough(
  dispatcher: Pick<Dispatcher, 'dispatch'>,
  o: { snapshot: Snapshot; model: DirectModel; timeoutMs: number; body: Record<string, unknown> },
): Promise<number[][]> {
  const cancel = new Cancel();
  const timer = o.timeoutMs > 0
    ? setTimeout(() => cancel.abort(new Error('embedding timeout')), o.timeoutMs)
    : undefined;
  try {
    const r = await dispatcher.dispatch({
      snapshot: o.snapshot,
      model: o.model,
      endpoint: 'embeddings',
      body: o.body,
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
}
