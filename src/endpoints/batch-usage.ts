// A completed batch's tokens, attributed once (docs/batch-files-endpoints.md "Batch accounting"): the first
// retrieve that sees `status: "completed"` downloads the output file in the background, sums each line's
// `response.body.usage` per billed model and logs one line per model with its tokens and cost. A failed
// download is tried again on a later retrieve.
import type { Logger } from '../observability/logger.ts';
import type { UpstreamFetch } from '../platform.ts';
import type { ApiKey } from '../resources/schema.ts';
import type { JobTarget } from './jobs-target.ts';
import { urlOf } from './jobs-url.ts';
import { decodeRoutedId } from './routed-id.ts';
import { timedFetch, upstreamHeaders } from './upstream.ts';

/** AISIX's bound on the detached download: output files can be large. */
const DOWNLOAD_TIMEOUT_MS = 120_000;

export interface BilledModel {
  model: string;
  input: number;
  output: number;
  cached: number;
}

/** Tokens per billed model in an output JSONL; lines without usage or with 0/0 are skipped. */
export function sumBatchOutput(jsonl: string): BilledModel[] {
  const by = new Map<string, BilledModel>();
  for (const line of jsonl.split('\n')) {
    if (line.trim() === '') continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      continue;
    }
    const body = (v as { response?: { body?: Record<string, unknown> } })?.response?.body;
    const usage = body?.usage as Record<string, unknown> | undefined;
    if (!usage) continue;
    const input = num(usage.prompt_tokens);
    const output = num(usage.completion_tokens);
    if (input === 0 && output === 0) continue;
    const cached = num((usage.prompt_tokens_details as Record<string, unknown> | undefined)?.cached_tokens);
    const model = typeof body?.model === 'string' ? body.model : '';
    const row = by.get(model) ?? { model, input: 0, output: 0, cached: 0 };
    row.input += input;
    row.output += output;
    row.cached += cached;
    by.set(model, row);
  }
  return [...by.values()];
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0;
}

export class BatchUsage {
  /** Batches attributed, or being attributed, by this process. */
  private readonly seen = new Set<string>();

  constructor(private readonly upstream: UpstreamFetch, private readonly log: Logger) {}

  /** A retrieve's answer: start the attribution when the batch has just been seen completed. */
  observe(batchId: string, json: Record<string, unknown>, target: JobTarget, headers: Headers, apiKey: ApiKey): void {
    if (json.status !== 'completed' || typeof json.output_file_id !== 'string') return;
    const output = decodeRoutedId(json.output_file_id)?.raw ?? json.output_file_id;
    if (!/^[A-Za-z0-9._:-]{1,256}$/.test(output) || this.seen.has(batchId)) return;
    this.seen.add(batchId);
    void this.attribute(batchId, output, target, headers, apiKey).catch((e) => {
      this.seen.delete(batchId);
      this.log.warn('batch usage attribution failed; will retry on next retrieve', {
        batch_id: batchId,
        error: e instanceof Error ? e.message : String(e),
      });
    });
  }

  private attribute(
    batchId: string,
    output: string,
    target: JobTarget,
    headers: Headers,
    apiKey: ApiKey,
  ): Promise<BilledModel[]> {
    const run = async () => {
      const url = urlOf(target, { path: `/files/${output}/content` }, '');
      if (typeof url !== 'string') throw new Error(url.message);
      const credential: Record<string, string> = target.adapter === 'azure-openai'
        ? { 'api-key': target.secret }
        : { authorization: `Bearer ${target.secret}` };
      const sent = await timedFetch(
        this.upstream,
        {
          url,
          method: 'GET',
          headers: upstreamHeaders(
            { key: target.key, model: target.model, apiKey, callerHeaders: headers, requestId: `batch-${batchId}` },
            credential,
          ),
          ...(target.key.tls ? { tls: target.key.tls } : {}),
        },
        DOWNLOAD_TIMEOUT_MS,
        undefined,
      );
      if (!('response' in sent)) throw new Error(sent.message);
      let text: string;
      try {
        if (sent.response.status !== 200) throw new Error(`output file download returned ${sent.response.status}`);
        text = await sent.response.text();
      } finally {
        sent.done();
      }
      const billed = sumBatchOutput(text);
      for (const b of billed) {
        // The model's `cost` is USD per 1K input and output tokens.
        const cost = target.model.cost;
        const usd = cost ? (b.input * (cost.input_per_1k ?? 0) + b.output * (cost.output_per_1k ?? 0)) / 1000 : 0;
        this.log.info('attributed completed batch usage', {
          batch_id: batchId,
          model: target.model.display_name,
          provider_model_version: b.model,
          input_tokens: b.input,
          output_tokens: b.output,
          cached_tokens: b.cached,
          cost_usd: Math.round(usd * 1_000_000) / 1_000_000,
          api_key_id: apiKey.id,
        });
      }
      return billed;
    };
    return run();
  }
}
