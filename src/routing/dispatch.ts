// Send one caller request to the model it names: resolve the targets, try them (retry, then fail over) in
// one loop, and hand back either a whole response or a live stream. Timeouts are enforced here, so every
// adapter gets them for free.
import type { Config } from '../config/schema.ts';
import type { UpstreamFetch } from '../platform.ts';
import { adapterFor } from '../providers/index.ts';
import type { Endpoint } from '../providers/types.ts';
import type { DirectModel, Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { errors, type ProxyError } from '../proxy/errors.ts';

export interface DispatchInput {
  snapshot: Snapshot;
  model: Model;
  /** For a direct model reached through a wildcard alias, the upstream model name. */
  upstreamModel?: string;
  endpoint: Endpoint;
  body: Record<string, unknown>;
  stream: boolean;
  /** Aborted when the caller goes away. */
  signal: AbortSignal;
}

export type DispatchResult =
  | { kind: 'response'; status: number; body: string; contentType: string; target: DirectModel }
  | { kind: 'stream'; chunks: AsyncIterable<Uint8Array>; silenceMs: number; abort(): void; target: DirectModel }
  | { kind: 'error'; error: ProxyError; target?: DirectModel };

export class Dispatcher {
  constructor(private readonly config: Config, private readonly upstream: UpstreamFetch) {}

  async dispatch(input: DispatchInput): Promise<DispatchResult> {
    const targets = this.targets(input);
    let last: DispatchResult = { kind: 'error', error: errors.upstream('no target could be tried') };
    for (const { target, upstreamModel } of targets) {
      const budget = target.retries ?? this.config.upstream.retries;
      for (let attempt = 0; attempt <= budget; attempt++) {
        if (input.signal.aborted) return { kind: 'error', error: errors.upstream('the caller went away'), target };
        last = await this.attempt(input, target, upstreamModel);
        if (!retryable(last)) return last;
        if (attempt < budget) await sleep(Math.min(2000, 250 * 2 ** attempt) * (0.5 + Math.random() / 2), input.signal);
      }
    }
    return last;
  }

  private targets(input: DispatchInput): { target: DirectModel; upstreamModel: string }[] {
    const m = input.model;
    if (m.kind === 'direct') return [{ target: m, upstreamModel: input.upstreamModel ?? m.model_name }];
    const out: { target: DirectModel; upstreamModel: string }[] = [];
    for (const t of m.routing.targets) {
      const tm = input.snapshot.modelByName(t.model);
      if (tm?.kind === 'direct') out.push({ target: tm, upstreamModel: tm.model_name });
    }
    return out;
  }

  private async attempt(input: DispatchInput, target: DirectModel, upstreamModel: string): Promise<DispatchResult> {
    const key = input.snapshot.providerKeys.get(target.provider_key_id);
    const adapter = key ? adapterFor(key.adapter) : undefined;
    if (!key || !adapter) return { kind: 'error', error: errors.upstream(`model "${target.display_name}" has no usable provider`), target };
    const up = this.config.upstream;
    const timeoutMs = target.timeout ?? up.timeout_ms;
    const silenceMs = target.stream_timeout ?? (up.stream_timeout_ms || timeoutMs);
    const ac = new AbortController();
    const onCallerGone = () => ac.abort(CALLER_GONE);
    input.signal.addEventListener('abort', onCallerGone, { once: true });
    const deadline = input.stream ? silenceMs : timeoutMs;
    const timer = deadline > 0 ? setTimeout(() => ac.abort(TIMED_OUT), deadline) : undefined;
    const cleanup = () => {
      clearTimeout(timer);
      input.signal.removeEventListener('abort', onCallerGone);
    };
    try {
      const r = await adapter.call({
        endpoint: input.endpoint,
        body: { ...input.body, model: upstreamModel },
        stream: input.stream,
        key,
        upstream: this.upstream,
        signal: ac.signal,
      });
      if (r.kind === 'stream') {
        clearTimeout(timer); // from here on the pump enforces the silence deadline between chunks
        return { kind: 'stream', chunks: r.chunks, silenceMs, target, abort: () => { cleanup(); ac.abort(CALLER_GONE); } };
      }
      cleanup();
      if (r.status >= 500) return { kind: 'error', error: errors.upstream(`upstream answered ${r.status}`), target };
      return { kind: 'response', status: r.status, body: r.body, contentType: r.contentType, target };
    } catch (e) {
      cleanup();
      if (ac.signal.reason === TIMED_OUT) return { kind: 'error', error: errors.timeout(), target };
      if (ac.signal.reason === CALLER_GONE) return { kind: 'error', error: errors.upstream('the caller went away'), target };
      return { kind: 'error', error: errors.upstream(`upstream request failed: ${(e as Error)?.message ?? 'transport error'}`), target };
    }
  }
}

const TIMED_OUT = 'sluice:timeout';
const CALLER_GONE = 'sluice:caller-gone';

function retryable(r: DispatchResult): boolean {
  return r.kind === 'error' && (r.error.status === 502 || r.error.status === 504) && r.error.message !== 'the caller went away';
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}
