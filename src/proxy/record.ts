// What one proxied request leaves behind: its access-log line and its sample in every request family
// (docs/aisix-compatibility.md "Metrics"), filled in as it is served and written once, when its last byte is out.
import type { Wire } from '../http/errors.ts';
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import { LineLayout } from '../observability/logger.ts';
import type { StreamEnd } from '../providers/types.ts';
import type { ApiKey, Model } from '../resources/schema.ts';
import type { DispatchResult, ServedBy } from '../routing/dispatch.ts';
import { SLO_ENDPOINTS } from '../observability/gateway-metrics.ts';
import type { BoundRequest } from '../observability/request-series.ts';
import type { RequestOutcome } from '../telemetry/trace.ts';
import { VERSION } from '../version.ts';
import { CACHE_RECORD, type CacheRecord } from './cache-record.ts';
import { GUARDRAIL_RECORD, type GuardrailRecord } from './guardrail-record.ts';
import { MEDIA_RECORD, type MediaRecord } from './media-usage.ts';
import type { RecordFacet, RecordPart } from './record-facet.ts';
import { OTHER_ENDPOINT, type Route, routeOf } from './routes.ts';
import { DROPPED_RECORD } from './translation-record.ts';
import { PASSTHROUGH_RECORD } from './passthrough-record.ts';
import { totalOf, type Usage } from './usage.ts';
import { type JwtFacts, USAGE_PART, type UsageFacts, type UsagePart } from '../usage/facts.ts';

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
  /** The caller's wire: its error envelope. */
  readonly protocol: Wire;
  /** `inbound_protocol`: the caller's wire, or the route's own protocol (`a2a`, `mcp`, `passthrough`). */
  readonly inbound: string;
  /** The configured name the caller asked for (a wildcard hit: the wildcard row's name). */
  private model: string | undefined = undefined;
  /** The model name as the caller wrote it (a wildcard hit: not the row's name); the provider-call line's. */
  private asked: string | undefined = undefined;
  /** Whether `model` is a routing model (then `served_by_model` names the target). */
  private routing = false;
  private key: ApiKey | undefined = undefined;
  /** Who the caller's JWT named (docs/identity.md), for the usage events. */
  private jwt: JwtFacts | undefined = undefined;
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
  /** The failure is the gateway's own, after the 200: what the stream's end says later does not replace it. */
  private endedHere = false;
  /** The features' parts (record-facet.ts), each made on its feature's first write; none: no Map. */
  private facets: Map<RecordPart<RecordFacet>, RecordFacet> | undefined = undefined;
  /** A relay to no model (a passthrough route): the labels it is counted under. */
  private relay: RelayLabels | undefined = undefined;

  constructor(
    readonly start: number,
    readonly method: string,
    readonly path: string,
    readonly requestId: string,
    readonly peer: string | undefined,
    readonly downstreamRequestId: string | undefined,
    /** The route, when the path does not name it (a passthrough route's request). */
    route?: Route,
  ) {
    this.route = route ?? routeOf(path);
    this.endpoint = this.route?.labels?.endpoint ?? this.route?.path ?? OTHER_ENDPOINT;
    this.protocol = this.route?.wire ?? 'openai';
    this.inbound = this.route?.labels?.protocol ?? this.route?.protocol ?? this.protocol;
  }

  /**
   * The request is relayed to no model (a passthrough route): the labels it is counted under. Its usage goes
   * to the access log only, never to a token family (AISIX's).
   */
  relayed(labels: RelayLabels): void {
    this.relay = labels;
  }

  /** The caller's key was accepted (selected by `jwt`, when the caller came with one). */
  identified(key: ApiKey, jwt?: JwtFacts): void {
    this.key = key;
    this.jwt = jwt;
  }

  /** The body named a model that exists (and the key may use); `asked` is its name as the caller wrote it. */
  resolved(model: Model, asked?: string): void {
    this.model = model.display_name;
    this.asked = asked;
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

  /**
   * The gateway ended the stream after its 200 (a guardrail's block; the caller got the error frame): the
   * request's failure, which the stream's end does not replace. Not an upstream failure.
   */
  endedByGateway(kind: string, message: string): void {
    this.failed(kind, message);
    this.endedHere = true;
  }

  /** A feature's part of this record (record-facet.ts), made on its first call. */
  facet<F extends RecordFacet>(part: RecordPart<F>): F {
    const facets = this.facets ??= new Map();
    let f = facets.get(part) as F | undefined;
    if (f === undefined) facets.set(part, f = part.create());
    return f;
  }

  /** Whether every feature's part lets `flag` stand (a part without a say does). */
  private allow(flag: 'providerCall' | 'charged'): boolean {
    if (this.facets === undefined) return true;
    for (const f of this.facets.values()) if (f[flag] === false) return false;
    return true;
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
    if (this.endedHere) return;
    this.failed(end, detail ?? end);
    if (end !== 'client_closed') this.outcome = 'upstream_error';
  }

  /**
   * What the request spent, as budgets charge it (docs/budgets.md): micro-USD at the serving upstream's `cost`
   * and total tokens; nothing for an answer spent before (a cache hit); undefined while no usage is known.
   */
  spent(): { microUsd: number; tokens: number } | undefined {
    const u = this.usage;
    if (!u) return undefined;
    if (!this.allow('charged')) return { microUsd: 0, tokens: 0 };
    return { microUsd: spendMicroUsd((this.served ?? this.direct)?.model.cost, u), tokens: totalOf(u) ?? 0 };
  }

  /** The caller left before any answer came: dispatch ended as `aborted`. */
  get abandoned(): boolean {
    return this.result?.kind === 'aborted';
  }

  /** Which upstream served (or failed last); undefined before an answer and for a caller who left. */
  private get served(): ServedBy | undefined {
    const r = this.result;
    return r && r.kind !== 'aborted' ? r.served : undefined;
  }

  /**
   * The access-log line's values, in `ACCESS_LOG_LAYOUT`'s order (AISIX's, docs/aisix-compatibility.md "Logs",
   * then Sluice's `peer` and `downstream_request_id`, then each feature's part in `RECORD_PARTS`' order);
   * `undefined` for an absent one, left out of the line.
   */
  accessLogValues(status: number, latencyMs: number): unknown[] {
    const s = this.served;
    const up = s ?? this.direct;
    const u = this.usage;
    const fixed = this.route?.labels;
    const values: unknown[] = [
      this.method,
      fixed ? fixed.endpoint : this.path,
      status,
      latencyMs,
      up ? providerOf(up) : this.relay?.logProvider ?? fixed?.provider,
      this.model,
      this.key?.id,
      u?.input,
      u?.output,
      totalOf(u),
      u?.estimated ? true : undefined, // Sluice's own: the token fields are the local estimate
      this.requestId,
      this.providerRequestId,
      this.routing && s ? s.model.display_name : undefined,
      s?.attempts,
      s?.fallbacks,
      this.errorKind,
      this.errorKind !== undefined ? (this.error ?? this.errorKind) : undefined,
      this.peer,
      this.downstreamRequestId,
      this.stream && this.firstByteAt !== undefined ? this.firstByteAt - this.start : undefined,
    ];
    for (const part of RECORD_PARTS) {
      const v = this.facets?.get(part)?.accessLogValues();
      for (let i = 0; i < part.fields.length; i++) values.push(v?.[i]);
    }
    return values;
  }

  /**
   * The provider-call line's values, in `PROVIDER_CALL_LAYOUT`'s order (AISIX's `provider call completed`,
   * docs/aisix-compatibility.md "Logs", then the attempt's latency figures under AISIX's usage-event names);
   * undefined when there is no line: no provider response id (a refusal, a failed attempt, an endpoint whose
   * answer has no id), or a feature's part says no upstream's answer reached the caller (a cache hit, a
   * guardrail block). `now` is `Date.now()`, the attempts' clock.
   */
  providerCallValues(status: number, now: number): unknown[] | undefined {
    const s = this.served;
    const handler = this.route?.call;
    if (!s || !handler || !ANSWER_IDS.has(handler) || !this.providerRequestId || !this.allow('providerCall')) {
      return undefined;
    }
    // The attempt's own time on the upstream: a stream's lasts to its end, which is now.
    const upstream = this.stream ? now - s.startedAt : s.durationMs;
    const ttft = this.stream ? this.upstreamTtftMs : undefined;
    const downstream = this.firstByteAt !== undefined ? this.firstByteAt - this.start : undefined;
    return [
      this.requestId,
      this.providerRequestId,
      s.attempts - 1,
      s.kind,
      handler,
      status,
      this.asked ?? this.model ?? '',
      s.upstreamModel,
      Math.max(0, Math.round(upstream)),
      ttft !== undefined && ttft > 0 ? Math.round(ttft) : undefined,
      downstream !== undefined && downstream > 0 ? Math.round(downstream) : undefined,
    ];
  }

  /** What the usage events read of the request, once its last byte is out (src/usage), with its trace's id. */
  usageFacts(traceId?: string): UsageFacts {
    const g = this.facets?.get(GUARDRAIL_RECORD) as GuardrailRecord | undefined;
    return {
      requestId: this.requestId,
      start: this.start,
      handler: this.route?.call,
      protocol: this.protocol,
      model: this.model,
      asked: this.asked,
      routing: this.routing,
      apiKeyId: this.key?.id,
      stream: this.stream,
      served: this.served,
      direct: this.direct,
      usage: this.usage,
      providerRequestId: this.providerRequestId,
      finishReason: (this.facets?.get(USAGE_PART) as UsagePart | undefined)?.finishReason,
      errorKind: this.errorKind,
      error: this.error,
      firstByteAt: this.firstByteAt,
      upstreamTtftMs: this.upstreamTtftMs,
      guardrails: g,
      cache: this.facets?.get(CACHE_RECORD) as CacheRecord | undefined,
      traceId,
      jwt: this.jwt,
      audioSeconds: (this.facets?.get(MEDIA_RECORD) as MediaRecord | undefined)?.audioSeconds,
    };
  }

  /** What the request's spans say about it (telemetry, src/telemetry/spans.ts). */
  traceOutcome(status: number): RequestOutcome {
    const s = this.served;
    const u = this.usage;
    const o: RequestOutcome = {
      status,
      operation: this.route?.call === 'embeddings'
        ? 'embeddings'
        : this.route?.call === 'completions'
        ? 'text_completion'
        : this.route?.kind === 'a2a-call'
        ? 'invoke_agent'
        : 'chat',
      requestModel: this.model,
      responseModel: s?.upstreamModel,
      responseId: this.providerRequestId,
      inputTokens: u?.input,
      outputTokens: u?.output,
      apiKeyId: this.key?.id,
      jwt: this.jwt,
      modelId: s?.model.id ?? this.direct?.model.id,
      clientIp: this.peer?.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1'),
      errorType: this.errorKind,
      downstreamTtftMs: this.firstByteAt !== undefined ? this.firstByteAt - this.start : undefined,
      upstreamTtftMs: this.stream ? this.upstreamTtftMs : undefined,
    };
    if (this.facets) { for (const f of this.facets.values()) f.traced?.(o); }
    return o;
  }

  /**
   * This request in every request family (docs/aisix-compatibility.md "Metrics"); missing identity labels are
   * `unknown`. `at`: the gateway clock's reading at its end, when the caller has one (the summaries' window).
   */
  recordMetrics(m: GatewayMetrics, status: number, seconds: number, at?: number): void {
    // The duration summaries see the response start (a stream: its first byte out), AISIX's timing.
    const started = this.firstByteAt !== undefined ? (this.firstByteAt - this.start) / 1000 : seconds;
    const s = this.served;
    const up = s ?? this.direct;
    const fixed = this.route?.labels;
    const relay = this.relay;
    const provider = up ? providerOf(up) : relay?.provider ?? fixed?.provider ?? 'unknown';
    const model = this.model ?? relay?.model ?? fixed?.model ?? 'unresolved';
    const outcome = this.outcome ?? outcomeOf(status);
    const code = String(status);
    // One literal (`concat` runs V8's C++ builtin each time). One lookup of these fifteen values finds every
    // series below (request-series.ts).
    const b = m.requestSeries.of([
      this.endpoint,
      this.inbound,
      provider,
      model,
      // The configured name (a wildcard alias: its pattern), never the caller's text: callers cannot grow the series.
      up?.model.model_name ?? 'unknown',
      up?.model.provider_key_id ?? relay?.providerKeyId ?? 'unknown',
      up?.key.display_name ?? relay?.providerKeyName ?? 'unknown',
      this.key?.id ?? 'unknown',
      identity(this.key, 'team_id'),
      identity(this.key, 'user_id'),
      identity(this.key, 'user_name'),
      this.stream ? 'true' : 'false',
      s?.isFallback ? 'true' : 'false',
      code,
      outcome,
    ]);
    b.legacyRequests.inc();
    b.legacyDuration.observe(started, at);
    b.proxyRequests.inc();
    if (outcome !== 'success') b.proxyFailedRequests.inc();
    b.proxyDuration.observe(started, at);
    if (this.route?.inference) {
      b.llmRequests.inc();
      b.llmDuration.observe(started, at);
    }
    this.recordSlo(b, seconds);
    const u = this.usage;
    const total = totalOf(u);
    if (u && total !== undefined && !relay) {
      if (u.input) b.llmInputTokens.inc(u.input);
      if (u.output) b.llmOutputTokens.inc(u.output);
      if (total > 0) {
        b.llmTotalTokens.inc(total);
        b.tokensConsumed.inc(total);
      }
      const spend = this.allow('charged') ? spendMicroUsd(up?.model.cost, u) : 0;
      if (spend > 0) b.llmSpend.inc(spend);
    }
  }

  /**
   * The SLO histograms (no per-key label) and the TTFT summary, AISIX's endpoints only: e2e once per request
   * at its last byte; TTFT for a stream whose serving attempt had a first frame (0 is not observed).
   */
  private recordSlo(b: BoundRequest, seconds: number) {
    if (!SLO_ENDPOINTS.has(this.endpoint)) return;
    b.requestE2e.observe(seconds);
    const ttft = this.upstreamTtftMs;
    if (this.stream && ttft !== undefined && ttft > 0) {
      b.requestTtft.observe(ttft / 1000);
      b.llmTtft.observe(ttft / 1000);
    }
  }
}

/** What a relayed request (a passthrough route's) is counted under. */
export interface RelayLabels {
  /** The access log's `provider` (AISIX: the route's name). */
  logProvider: string;
  /** The `provider` label. */
  provider: string;
  /** The `model` label. */
  model: string;
  providerKeyId?: string;
  providerKeyName?: string;
}

/**
 * The features' parts of the record, in the access log's order (after the core fields): the one place a feature's
 * fields are placed. A new feature adds its part here.
 */
const RECORD_PARTS: readonly RecordPart<RecordFacet>[] = [
  CACHE_RECORD,
  DROPPED_RECORD,
  GUARDRAIL_RECORD,
  MEDIA_RECORD,
  PASSTHROUGH_RECORD,
];

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

/** The endpoints whose answer carries a per-call response id AISIX records (embeddings and counting have none). */
const ANSWER_IDS = new Set(['chat', 'completions', 'responses', 'messages']);

/** AISIX's target of the provider-call line (its `aisix_obs::usage` module). */
export const PROVIDER_CALL_TARGET = 'aisix_obs::usage';

/** The provider-call line's fields, in order (`RequestRecord.providerCallValues`). */
export const PROVIDER_CALL_LAYOUT = new LineLayout([
  'request_id',
  'provider_request_id',
  'attempt_index',
  'attempt_kind',
  'handler',
  'status',
  'requested_model',
  'provider_model_version',
  'upstream_latency_ms',
  'upstream_ttft_ms',
  'downstream_latency_ms',
]);

/** The access-log line's fields, in order (`RequestRecord.accessLogValues`). */
export const ACCESS_LOG_LAYOUT = new LineLayout([
  'method',
  'path',
  'status',
  'latency_ms',
  'provider',
  'model',
  'api_key_id',
  'prompt_tokens',
  'completion_tokens',
  'total_tokens',
  'usage_estimated',
  'request_id',
  'provider_request_id',
  'served_by_model',
  'routing_attempt_count',
  'routing_fallback_count',
  'error_kind',
  'error',
  'peer',
  'downstream_request_id',
  'ttft_ms',
  ...RECORD_PARTS.flatMap((p) => p.fields),
]);

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
