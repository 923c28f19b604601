// What one proxied request leaves behind: its access-log line and its sample in every request family
// (docs/aisix-compatibility.md "Metrics"), filled in as it is served and written once, when its last byte is out.
import type { Wire } from '../http/errors.ts';
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import type { StreamEnd } from '../providers/types.ts';
import type { ApiKey, Model } from '../resources/schema.ts';
import type { DispatchResult, ServedBy } from '../routing/dispatch.ts';
import { SLO_ENDPOINTS } from '../observability/gateway-metrics.ts';
import type { RequestOutcome, RequestTrace } from '../telemetry/trace.ts';
import { VERSION } from '../version.ts';
import { OTHER_ENDPOINT, type Route, routeOf } from './routes.ts';
import { totalOf, type Usage } from './usage.ts';

/** The upstream a request went to: the part of `ServedBy` the labels read. */
type Upstream = Pick<ServedBy, 'model' | 'key' | 'upstreamModel'>;

/**
 * What the access log and metrics record of one request. The tracking middleware creates it; the steps fill
 * it through the methods below (nothing else writes it); `telemetry` writes it once, when the last byte is out.
 */
export class RequestRecord {
  readonly route: Route | undefined;
  /** The `endpoint` label: the route's template, `other` for any other path. */
  readonly endpoint: string;
  /** `inbound_protocol`: the caller's wire. */
  readonly protocol: Wire;
  /** The configured name the caller asked for (a wildcard hit: the wildcard row's name). */
  private model: string | undefined = undefined;
  /** Whether `model` is a routing model (then `served_by_model` names the target). */
  private routing = false;
  private key: ApiKey | undefined = undefined;
  private stream = false;
  /** The dispatcher's answer: its `served` says which upstream served it (or failed it last). */
  private result: DispatchResult | undefined = undefined;
  /** A direct model's own upstream, labelling the request when the dispatcher says nothing more. */
  private direct: Upstream | undefined = undefined;
  private usage: Usage | undefined = undefined;
  private providerRequestId: string | undefined = undefined;
  private errorKind: string | undefined = undefined;
  /** The failure's message (the access log's `error`). */
  private error: string | undefined = undefined;
  /**
   * The outcome label when the status the caller saw does not tell it: a stream that answered 200 and then
   * failed, was cut or carried an upstream error event is `upstream_error` (AISIX's outcome vocabulary).
   */
  private outcome: string | undefined = undefined;
  /** When the first byte of the answer went out (clock ms); a whole answer: when it was handed over. */
  private firstByteAt: number | undefined = undefined;
  /** The serving attempt's upstream time to its first SSE frame (ms), for a stream. */
  private upstreamTtftMs: number | undefined = undefined;
  /** This request's trace, when an exporter keeps it (telemetry); undefined otherwise. */
  trace: RequestTrace | undefined = undefined;
  private blockedByPolicy = false;
  /** The response cache's part (docs/cache.md): set when a policy applied to this request. */
  private cache: CacheRecord | undefined = undefined;

  constructor(
    readonly start: number,
    readonly method: string,
    readonly path: string,
    readonly requestId: string,
    readonly peer: string | undefined,
    readonly downstreamRequestId: string | undefined,
  ) {
    this.route = routeOf(path);
    this.endpoint = this.route?.path ?? OTHER_ENDPOINT;
    this.protocol = this.route?.wire ?? 'openai';
  }

  /** The caller's key was accepted. */
  identified(key: ApiKey): void {
    this.key = key;
  }

  /** The body named a model that exists (and the key may use). */
  resolved(model: Model): void {
    this.model = model.display_name;
    this.routing = model.kind === 'routing';
  }

  /** The call was admitted and goes to dispatch; `direct` is a direct model's own upstream. */
  dispatching(stream: boolean, direct: Upstream | undefined): void {
    this.stream = stream;
    this.direct = direct;
  }

  answered(result: DispatchResult): void {
    this.result = result;
  }

  /**
   * What the answer said it used, and the provider's response id. A later read that knows nothing keeps an
   * earlier one (a stream a guardrail blocked was read before the caller's copy was cut).
   */
  read(usage: Usage | undefined, providerRequestId: string | undefined): void {
    if (usage === undefined && this.usage !== undefined) return;
    this.usage = usage;
    this.providerRequestId = providerRequestId;
  }

  /** A guardrail ended the stream after its 200 (the caller got the error frame); not an upstream failure. */
  policyBlocked(message: string): void {
    this.failed('content_filter', message);
    this.blockedByPolicy = true;
  }

  /** A cache policy applied: `miss` or `bypass` (the request goes upstream). */
  cacheMissed(status: 'miss' | 'bypass'): void {
    this.cache = { status };
  }

  /** Answered from the cache: its stored usage is replayed in the token families, and no spend is counted. */
  cacheHit(
    layer: 'exact' | 'semantic',
    similarity: number | undefined,
    saved: { input: number; output: number },
  ): void {
    this.cache = { status: 'hit', layer, similarity, saved };
    this.usage = { input: saved.input, output: saved.output };
  }

  /** The request failed: `kind` is the access log's `error_kind`, `message` its `error`. */
  failed(kind: string, message: string): void {
    this.errorKind = kind;
    this.error = message;
  }

  /** Whether the call was dispatched as a stream. */
  get streamed(): boolean {
    return this.stream;
  }

  /** The answer's first byte went out to the caller (`at`: clock ms); only the first call counts. */
  firstByte(at: number): void {
    this.firstByteAt ??= at;
  }

  /** The serving attempt's upstream time to first token of a stream (ms). */
  firstToken(ms: number | undefined): void {
    this.upstreamTtftMs = ms;
  }

  /** A stream that answered 200 ended otherwise than whole. */
  streamFailed(end: Exclude<StreamEnd, 'complete'>, detail: string | undefined): void {
    if (this.blockedByPolicy) return;
    this.failed(end, detail ?? end);
    if (end !== 'client_closed') this.outcome = 'upstream_error';
  }

  /** Which upstream served (or failed last); undefined before an answer and for a caller who left. */
  private get served(): ServedBy | undefined {
    const r = this.result;
    return r && r.kind !== 'aborted' ? r.served : undefined;
  }

  /**
   * The access-log line's fields, in AISIX's order (docs/aisix-compatibility.md "Logs"), then Sluice's `peer`
   * and `downstream_request_id`. Absent values are omitted from the line.
   */
  accessLogFields(status: number, latencyMs: number): Record<string, unknown> {
    const s = this.served;
    const up = s ?? this.direct;
    const u = this.usage;
    return {
      method: this.method,
      path: this.path,
      status,
      latency_ms: latencyMs,
      provider: up ? providerOf(up) : undefined,
      model: this.model,
      api_key_id: this.key?.id,
      prompt_tokens: u?.input,
      completion_tokens: u?.output,
      total_tokens: totalOf(u),
      // Sluice's own: the token fields are the local estimate (the upstream reported none).
      usage_estimated: u?.estimated ? true : undefined,
      request_id: this.requestId,
      provider_request_id: this.providerRequestId,
      served_by_model: this.routing && s ? s.model.display_name : undefined,
      routing_attempt_count: s?.attempts,
      routing_fallback_count: s?.fallbacks,
      error_kind: this.errorKind,
      error: this.errorKind !== undefined ? (this.error ?? this.errorKind) : undefined,
      peer: this.peer,
      downstream_request_id: this.downstreamRequestId,
      ttft_ms: this.stream && this.firstByteAt !== undefined ? this.firstByteAt - this.start : undefined,
      cache_status: this.cache?.status,
      cache_hit_layer: this.cache?.layer,
      cache_similarity: this.cache?.similarity,
      cache_hit_saved_input_tokens: this.cache?.saved?.input,
      cache_hit_saved_output_tokens: this.cache?.saved?.output,
    };
  }

  /** What the request's spans say about it (telemetry, src/telemetry/spans.ts). */
  traceOutcome(status: number): RequestOutcome {
    const s = this.served;
    const u = this.usage;
    const attempted = this.trace !== undefined && this.trace.attempts.length > 0;
    return {
      status,
      operation: this.route?.call === 'embeddings'
        ? 'embeddings'
        : this.route?.call === 'completions'
        ? 'text_completion'
        : 'chat',
      requestModel: this.model,
      responseModel: s?.upstreamModel,
      responseId: this.providerRequestId,
      inputTokens: u?.input,
      outputTokens: u?.output,
      apiKeyId: this.key?.id,
      modelId: s?.model.id ?? this.direct?.model.id,
      clientIp: this.peer?.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1'),
      errorType: this.errorKind,
      downstreamTtftMs: this.firstByteAt !== undefined ? this.firstByteAt - this.start : undefined,
      rateLimited: status === 429 && !attempted,
    };
  }

  /** This request in every request family (docs/aisix-compatibility.md "Metrics"); missing identity labels are `unknown`. */
  recordMetrics(m: GatewayMetrics, status: number, seconds: number): void {
    // The duration summaries see the response start (a stream: its first byte out), AISIX's timing.
    const started = this.firstByteAt !== undefined ? (this.firstByteAt - this.start) / 1000 : seconds;
    const s = this.served;
    const up = s ?? this.direct;
    const provider = up ? providerOf(up) : 'unknown';
    const model = this.model ?? 'unresolved';
    const outcome = this.outcome ?? outcomeOf(status);
    const code = String(status);
    const ident = [
      this.endpoint,
      this.protocol,
      provider,
      model,
      up?.upstreamModel ?? 'unknown',
      up?.model.provider_key_id ?? 'unknown',
      up?.key.display_name ?? 'unknown',
      this.key?.id ?? 'unknown',
      identity(this.key, 'team_id'),
      identity(this.key, 'user_id'),
      identity(this.key, 'user_name'),
    ];
    // Each family's own labels after the identity ones: `concat`, not spread copies (on every request).
    const stream = this.stream ? 'true' : 'false';
    const labels = ident.concat(stream, s?.isFallback ? 'true' : 'false', code, outcome);
    const durationLabels = ident.concat(stream, code, outcome);
    m.legacyRequests.inc([provider, model, code, outcome]);
    m.legacyDuration.observe([provider, model, code], started);
    m.proxyRequests.inc(labels);
    if (outcome !== 'success') m.proxyFailedRequests.inc(labels);
    m.proxyDuration.observe(durationLabels, started);
    if (this.route?.inference) {
      m.llmRequests.inc(labels);
      m.llmDuration.observe(durationLabels, started);
    }
    this.recordSlo(m, provider, model, status, ident, seconds);
    const u = this.usage;
    const total = totalOf(u);
    if (u && total !== undefined) {
      if (u.input) m.llmInputTokens.inc(ident, u.input);
      if (u.output) m.llmOutputTokens.inc(ident, u.output);
      if (total > 0) {
        m.llmTotalTokens.inc(ident, total);
        m.tokensConsumed.inc([provider, model], total);
      }
      const spend = this.cache?.status === 'hit' ? 0 : spendMicroUsd(up?.model.cost, u);
      if (spend > 0) m.llmSpend.inc(ident, spend);
    }
  }

  /**
   * The SLO histograms (no per-key label) and the TTFT summary, AISIX's endpoints only: e2e once per request
   * at its last byte; TTFT for a stream whose serving attempt had a first frame (0 is not observed).
   */
  private recordSlo(
    m: GatewayMetrics,
    provider: string,
    model: string,
    status: number,
    ident: string[],
    seconds: number,
  ) {
    if (!SLO_ENDPOINTS.has(this.endpoint)) return;
    const streaming = this.stream ? 'true' : 'false';
    const slo = ['unknown', this.endpoint, model, provider, statusClass(status), streaming];
    m.requestE2e.observe(slo, seconds);
    const ttft = this.upstreamTtftMs;
    if (this.stream && ttft !== undefined && ttft > 0) {
      m.requestTtft.observe(slo, ttft / 1000);
      m.llmTtft.observe(ident, ttft / 1000);
    }
  }
}

/** AISIX's `status_class`. */
function statusClass(status: number): string {
  return status >= 200 && status < 600 ? `${Math.floor(status / 100)}xx` : 'other';
}

/** AISIX's usage-event cache fields, written in the access log (Sluice has no usage events). */
interface CacheRecord {
  status: 'hit' | 'miss' | 'bypass';
  layer?: 'exact' | 'semantic';
  similarity?: number;
  saved?: { input: number; output: number };
}

/** A proxy response's `Server` header. */
export const SERVER = `sluice/${VERSION}`;

/** AISIX's outcome classes: 2xx/3xx success, 429 rate_limited, other 4xx client_error, the rest upstream_error. */
export function outcomeOf(status: number): string {
  if (status < 400) return 'success';
  if (status === 429) return 'rate_limited';
  return status < 500 ? 'client_error' : 'upstream_error';
}

/** AISIX's access-log target (its `aisix_obs::access_log` module). */
export const ACCESS_LOG_TARGET = 'aisix_obs::access_log';

function providerOf(s: Upstream): string {
  return s.model.provider ?? (s.key.provider || 'unknown');
}

/** An api key's AISIX identity field (`team_id`, `user_id`, `user_name`), `unknown` when absent. */
function identity(key: ApiKey | undefined, field: 'team_id' | 'user_id' | 'user_name'): string {
  const v = (key as Record<string, unknown> | undefined)?.[field];
  return typeof v === 'string' && v !== '' ? v : 'unknown';
}

/** micro-USD for `usage` at the model's `cost` (USD per 1K input / output tokens); 0 without a cost. */
export function spendMicroUsd(cost: Record<string, number> | undefined, u: Usage): number {
  if (!cost) return 0;
  const input = (u.input ?? 0) * (cost.input_per_1k ?? 0);
  const output = (u.output ?? 0) * (cost.output_per_1k ?? 0);
  return Math.round(((input + output) / 1000) * 1_000_000);
}
