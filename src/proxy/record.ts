// What one proxied request leaves behind: its access-log line and its sample in every request family
// (docs/aisix-compatibility.md "Metrics"), filled in as it is served and written once, when its last byte is out.
import type { ApiKey } from '../resources/schema.ts';
import type { Gateway } from '../gateway.ts';
import type { DispatchResult, ServedBy } from '../routing/dispatch.ts';
import { totalOf, type Usage } from './usage.ts';
import { VERSION } from '../version.ts';

/** What the access log and metrics record of one request, filled in as it is served. */
export interface RequestRecord {
  start: number;
  method: string;
  path: string;
  endpoint: string;
  /** `inbound_protocol`: `anthropic` on `/v1/messages`, else `openai`. */
  protocol: 'openai' | 'anthropic';
  requestId: string;
  peer: string | undefined;
  downstreamRequestId: string | undefined;
  /** The configured name the caller asked for (a wildcard hit: the wildcard row's name). */
  model?: string;
  /** Whether `model` is a routing model (then `served_by_model` names the target). */
  routing?: boolean;
  key?: ApiKey;
  apiKeyId?: string;
  stream?: boolean;
  /** The dispatcher's answer: `served` says which upstream served it (or failed it last). */
  result?: DispatchResult;
  served?: ServedBy;
  /** A direct model's own upstream, labelling the request when the dispatcher says nothing more. */
  direct?: Upstream;
  usage?: Usage;
  providerRequestId?: string;
  errorKind?: string;
  /** The failure's message (the access log's `error`). */
  error?: string;
  /**
   * The outcome label when the status the caller saw does not tell it: a stream that answered 200 and then
   * failed, was cut or carried an upstream error event is `upstream_error` (AISIX's outcome vocabulary).
   */
  outcome?: string;
}

/** A proxy response's `Server` header. */
export const SERVER = `sluice/${VERSION}`;

/** Route templates: the `endpoint` label value (AISIX's convention); anything else is `other`. */
export const ENDPOINTS: Record<string, string> = {
  '/v1/chat/completions': '/v1/chat/completions',
  '/v1/completions': '/v1/completions',
  '/v1/embeddings': '/v1/embeddings',
  '/v1/models': '/v1/models',
  '/v1/messages': '/v1/messages',
};
/** Model-inference endpoints: their requests are also counted in the `aisix_llm_*` families. */
export const INFERENCE = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/messages']);

/** AISIX's outcome classes: 2xx/3xx success, 429 rate_limited, other 4xx client_error, the rest upstream_error. */
export function outcomeOf(status: number): string {
  if (status < 400) return 'success';
  if (status === 429) return 'rate_limited';
  return status < 500 ? 'client_error' : 'upstream_error';
}

/** AISIX's access-log target (its `aisix_obs::access_log` module). */
export const ACCESS_LOG_TARGET = 'aisix_obs::access_log';

/**
 * The access-log line's fields, in AISIX's order (docs/aisix-compatibility.md "Logs"), then Sluice's `peer` and
 * `downstream_request_id`. Absent values are omitted from the line.
 */
export function accessLogFields(rec: RequestRecord, status: number, latencyMs: number): Record<string, unknown> {
  const s = rec.served;
  const up = s ?? rec.direct;
  const u = rec.usage;
  return {
    method: rec.method,
    path: rec.path,
    status,
    latency_ms: latencyMs,
    provider: up ? providerOf(up) : undefined,
    model: rec.model,
    api_key_id: rec.apiKeyId,
    prompt_tokens: u?.input,
    completion_tokens: u?.output,
    total_tokens: totalOf(u),
    request_id: rec.requestId,
    provider_request_id: rec.providerRequestId,
    served_by_model: rec.routing && s ? s.model.display_name : undefined,
    routing_attempt_count: s?.attempts,
    routing_fallback_count: s?.fallbacks,
    error_kind: rec.errorKind,
    error: rec.errorKind !== undefined ? (rec.error ?? rec.errorKind) : undefined,
    peer: rec.peer,
    downstream_request_id: rec.downstreamRequestId,
  };
}

/** The upstream a request went to: the part of `ServedBy` the labels read. */
type Upstream = Pick<ServedBy, 'model' | 'key' | 'upstreamModel'>;

function providerOf(s: Upstream): string {
  return s.model.provider ?? (s.key.provider || 'unknown');
}
/** An api key's AISIX identity field (`team_id`, `user_id`, `user_name`), `unknown` when absent. */
function identity(key: ApiKey | undefined, field: 'team_id' | 'user_id' | 'user_name'): string {
  const v = (key as Record<string, unknown> | undefined)?.[field];
  return typeof v === 'string' && v !== '' ? v : 'unknown';
}

/** One proxied request in every request family (docs/aisix-compatibility.md "Metrics"); missing identity labels are `unknown`. */
export function recordRequestMetrics(gw: Gateway, rec: RequestRecord, status: number, seconds: number): void {
  const m = gw.metrics;
  const s = rec.served;
  const up = s ?? rec.direct;
  const provider = up ? providerOf(up) : 'unknown';
  const model = rec.model ?? 'unresolved';
  const outcome = rec.outcome ?? outcomeOf(status);
  const code = String(status);
  const ident = [
    rec.endpoint,
    rec.protocol,
    provider,
    model,
    up?.upstreamModel ?? 'unknown',
    up?.model.provider_key_id ?? 'unknown',
    up?.key.display_name ?? 'unknown',
    rec.apiKeyId ?? 'unknown',
    identity(rec.key, 'team_id'),
    identity(rec.key, 'user_id'),
    identity(rec.key, 'user_name'),
  ];
  // Each family's own labels after the identity ones: `concat`, not spread copies (on every request).
  const stream = rec.stream ? 'true' : 'false';
  const labels = ident.concat(stream, s?.isFallback ? 'true' : 'false', code, outcome);
  const durationLabels = ident.concat(stream, code, outcome);
  m.legacyRequests.inc([provider, model, code, outcome]);
  m.legacyDuration.observe([provider, model, code], seconds);
  m.proxyRequests.inc(labels);
  if (outcome !== 'success') m.proxyFailedRequests.inc(labels);
  m.proxyDuration.observe(durationLabels, seconds);
  if (INFERENCE.has(rec.endpoint)) {
    m.llmRequests.inc(labels);
    m.llmDuration.observe(durationLabels, seconds);
  }
  const u = rec.usage;
  const total = totalOf(u);
  if (u && total !== undefined) {
    if (u.input) m.llmInputTokens.inc(ident, u.input);
    if (u.output) m.llmOutputTokens.inc(ident, u.output);
    if (total > 0) {
      m.llmTotalTokens.inc(ident, total);
      m.tokensConsumed.inc([provider, model], total);
    }
    const spend = spendMicroUsd(up?.model.cost, u);
    if (spend > 0) m.llmSpend.inc(ident, spend);
  }
}

/** micro-USD for `usage` at the model's `cost` (USD per 1K input / output tokens); 0 without a cost. */
export function spendMicroUsd(cost: Record<string, number> | undefined, u: Usage): number {
  if (!cost) return 0;
  const input = (u.input ?? 0) * (cost.input_per_1k ?? 0);
  const output = (u.output ?? 0) * (cost.output_per_1k ?? 0);
  return Math.round(((input + output) / 1000) * 1_000_000);
}
