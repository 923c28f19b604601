// The response cache's part of a request's record (record-facet.ts; docs/cache.md): AISIX's usage-event cache
// fields, written in the access log (Sluice has no usage events) and on the serving span.
import type { RequestOutcome } from '../telemetry/trace.ts';
import type { RecordFacet, RecordPart } from './record-facet.ts';

export class CacheRecord implements RecordFacet {
  status: 'hit' | 'miss' | 'bypass' = 'miss';
  layer: 'exact' | 'semantic' | undefined = undefined;
  similarity: number | undefined = undefined;
  saved: { input: number; output: number } | undefined = undefined;

  /** Answered from the cache: its stored usage is what the record's token fields replay. */
  hit(layer: 'exact' | 'semantic', similarity: number | undefined, saved: { input: number; output: number }): void {
    this.status = 'hit';
    this.layer = layer;
    this.similarity = similarity;
    this.saved = saved;
  }

  get providerCall(): boolean {
    return this.status !== 'hit';
  }

  get charged(): boolean {
    return this.status !== 'hit';
  }

  accessLogValues(): readonly unknown[] {
    return [this.status, this.layer, this.similarity, this.saved?.input, this.saved?.output];
  }

  traced(o: RequestOutcome): void {
    o.cache = this.status === 'hit'
      ? { status: this.status, layer: this.layer, similarity: this.similarity, saved: this.saved }
      : { status: this.status };
  }
}

/** Set when a cache policy applied to the request. */
export const CACHE_RECORD: RecordPart<CacheRecord> = {
  name: 'cache',
  fields: [
    'cache_status',
    'cache_hit_layer',
    'cache_similarity',
    'cache_hit_saved_input_tokens',
    'cache_hit_saved_output_tokens',
  ],
  create: () => new CacheRecord(),
};
