// A finished request's trace as OTLP/JSON spans for one exporter (docs/operations.md "Tracing" lists every
// attribute). AISIX's names, kinds, flags and attributes, with the OpenTelemetry GenAI semantic-convention
// attributes beside them (`gen_ai.provider.name`, `error.type`, `server.address`, `server.port`).
import { capContent } from './content.ts';
import type { AttemptSpan, CacheOutcome, RequestOutcome, RequestTrace } from './trace.ts';

/** OTLP/JSON `AnyValue` as the JSON mapping writes it (int64 as a decimal string). */
export type OtlpValue =
  | { stringValue: string }
  | { intValue: string }
  | { doubleValue: number }
  | { boolValue: boolean }
  | { arrayValue: { values: OtlpValue[] } };

export interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: OtlpAttribute[];
  status: { code: number };
  flags: number;
}

export const SPAN_KIND_SERVER = 2;
export const SPAN_KIND_CLIENT = 3;
export const STATUS_OK = 1;
export const STATUS_ERROR = 2;
/** Every model endpoint's span name (AISIX's). */
export const SPAN_NAME = 'chat.completions';
/** W3C sampled + the OTLP "has is_remote" bit; a continued remote parent adds is_remote. */
const FLAG_SAMPLED = 0x01;
const FLAG_HAS_IS_REMOTE = 0x100;
const FLAG_IS_REMOTE = 0x200;
const FLAG_RANDOM = 0x02;
const MAX_ERROR_MESSAGE = 2048;

/** What an exporter's spans depend on besides the trace. */
export interface SpanOptions {
  exporterName: string;
  /** `content_mode: full`: the cap per captured field; undefined = metadata only. */
  contentMaxBytes?: number;
}

const str = (key: string, v: string): OtlpAttribute => ({ key, value: { stringValue: v } });
const int = (key: string, v: number): OtlpAttribute => ({ key, value: { intValue: String(Math.round(v)) } });
const bool = (key: string, v: boolean): OtlpAttribute => ({ key, value: { boolValue: v } });
const double = (key: string, v: number): OtlpAttribute => ({ key, value: { doubleValue: v } });

/** Unix nanoseconds as a decimal string, exact beyond 2^53. */
export function unixNano(wallMs: number, offsetMs: number): string {
  const whole = Math.floor(wallMs);
  const frac = Math.round((wallMs - whole + offsetMs) * 1e6);
  return (BigInt(whole) * 1_000_000n + BigInt(frac)).toString();
}

function statusOf(status: number | undefined): { code: number } {
  return { code: status !== undefined && status >= 200 && status < 300 ? STATUS_OK : STATUS_ERROR };
}

/** Control characters removed, at most 2048 characters (AISIX's `aisix.error_message`). */
export function cleanErrorMessage(m: string): string {
  // deno-lint-ignore no-control-regex
  const clean = m.replace(/[\u0000-\u001f\u007f]/g, '');
  return clean.length > MAX_ERROR_MESSAGE ? clean.slice(0, MAX_ERROR_MESSAGE) : clean;
}

/** A caller-chosen identity value as the usage event writes it: control characters removed, at most 256. */
function cleanId(v: string): string {
  // deno-lint-ignore no-control-regex
  const clean = v.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, '');
  return clean.length > MAX_ID ? clean.slice(0, MAX_ID) : clean;
}
const MAX_ID = 256;

/** The structural set every span carries. */
function structural(t: RequestTrace, o: RequestOutcome, opts: SpanOptions, status: number): OtlpAttribute[] {
  const a = [
    str('gen_ai.system', 'aisix'),
    str('gen_ai.operation.name', o.operation),
    str('aisix.exporter_name', opts.exporterName),
    str('aisix.request_id', t.requestId),
    int('http.response.status_code', status),
  ];
  if (o.requestModel) a.push(str('gen_ai.request.model', o.requestModel));
  return a;
}

/** The event set: on the attempt spans (each its own status), or on the logical span without attempts. */
function eventAttributes(
  t: RequestTrace,
  o: RequestOutcome,
  opts: SpanOptions,
  at: AttemptSpan | undefined,
  serving: boolean,
): OtlpAttribute[] {
  const status = at?.status ?? o.status;
  const a = structural(t, o, opts, status);
  if (serving) {
    if (o.responseModel) a.push(str('gen_ai.response.model', o.responseModel));
    if (o.responseId) a.push(str('gen_ai.response.id', o.responseId));
    if (o.finishReason) {
      a.push({
        key: 'gen_ai.response.finish_reasons',
        value: { arrayValue: { values: [{ stringValue: o.finishReason }] } },
      });
    }
  }
  a.push(int('gen_ai.usage.input_tokens', serving ? o.inputTokens ?? 0 : 0));
  a.push(int('gen_ai.usage.output_tokens', serving ? o.outputTokens ?? 0 : 0));
  if (at?.provider) a.push(str('gen_ai.provider.name', at.provider));
  if (at?.serverAddress) a.push(str('server.address', at.serverAddress));
  if (at?.serverPort !== undefined) a.push(int('server.port', at.serverPort));
  if (o.apiKeyId) a.push(str('aisix.api_key_id', o.apiKeyId));
  if (o.jwt) {
    a.push(str('aisix.jwt_subject', cleanId(o.jwt.subject)), str('aisix.jwt_provider', cleanId(o.jwt.provider)));
    if (o.jwt.claimMapping !== undefined) a.push(str('aisix.jwt_claim_mapping', cleanId(o.jwt.claimMapping)));
  }
  // An attempt's own target (each attempt is its own record); the request's model without attempts.
  const modelId = at?.targetId || o.modelId;
  if (modelId) a.push(str('aisix.model_id', modelId));
  if (at) {
    a.push(
      int('aisix.attempt_index', at.index),
      str('aisix.attempt_kind', at.kind),
      str('aisix.attempt_model', at.model),
    );
    if (at.ttftMs !== undefined && at.ttftMs > 0) a.push(int('aisix.upstream_ttft_ms', at.ttftMs));
  }
  const errorClass = at?.errorClass ?? (o.rateLimited ? 'rate_limit_exceeded' : undefined);
  if (errorClass) a.push(str('aisix.error_class', errorClass));
  if (at?.errorMessage) a.push(str('aisix.error_message', cleanErrorMessage(at.errorMessage)));
  const failed = status < 200 || status >= 300;
  if (failed) a.push(str('error.type', errorClass ?? o.errorType ?? String(status)));
  if (serving && o.downstreamTtftMs !== undefined && o.downstreamTtftMs > 0) {
    a.push(int('aisix.downstream_latency_ms', o.downstreamTtftMs));
  }
  if (o.clientIp) a.push(str('aisix.client_source_ip', o.clientIp));
  const ua = o.userAgent ?? t.userAgent;
  if (ua) a.push(str('aisix.client_user_agent', ua));
  if (serving && o.cache) a.push(...cacheAttributes(o.cache));
  if (serving) a.push(...contentAttributes(t, o, opts));
  for (const [k, v] of Object.entries(o.callAttributes ?? {})) a.push(typeof v === 'number' ? int(k, v) : str(k, v));
  return a;
}

/** The cache decision under AISIX's usage-event names (`cache_status`, `cache_hit_layer`, …), prefixed `aisix.`. */
function cacheAttributes(c: CacheOutcome): OtlpAttribute[] {
  const a = [str('aisix.cache_status', c.status)];
  if (c.layer) a.push(str('aisix.cache_hit_layer', c.layer));
  if (c.similarity !== undefined) a.push(double('aisix.cache_similarity', c.similarity));
  if (c.saved) {
    a.push(
      int('aisix.cache_hit_saved_input_tokens', c.saved.input),
      int('aisix.cache_hit_saved_output_tokens', c.saved.output),
    );
  }
  return a;
}

function contentAttributes(t: RequestTrace, o: RequestOutcome, opts: SpanOptions): OtlpAttribute[] {
  if (opts.contentMaxBytes === undefined) return [];
  const a: OtlpAttribute[] = [];
  let truncated = false;
  const captured = [['gen_ai.prompt', o.prompt ?? t.prompt], ['gen_ai.completion', o.completion ?? t.completion]];
  for (const [key, text] of captured as [string, string | undefined][]) {
    if (text === undefined) continue;
    const c = capContent(text, opts.contentMaxBytes);
    truncated ||= c.truncated;
    a.push(str(key, c.text));
  }
  if (truncated) a.push(bool('aisix.content_truncated', true));
  return a;
}

/**
 * How many spans `buildSpans` makes of `t`: SERVER alone, with a tool or agent call's one CLIENT span, or with
 * the logical span and one per attempt.
 */
export function spanCountOf(t: RequestTrace, o?: RequestOutcome): number {
  if (t.attempts.length === 0) return o?.upstreamCall ? 2 : 1;
  return 2 + t.attempts.length;
}

/**
 * The spans of one finished request: SERVER, then (when it reached an upstream) the logical CLIENT span and
 * one CLIENT span per attempt. A request answered before dispatch (a refusal, a response-cache hit) is its
 * SERVER span alone, carrying the event set.
 */
export function buildSpans(t: RequestTrace, o: RequestOutcome, opts: SpanOptions): OtlpSpan[] {
  const end = t.end ?? t.elapsed();
  const remote = t.remote;
  const flags = FLAG_SAMPLED | FLAG_HAS_IS_REMOTE;
  const name = o.spanName ?? SPAN_NAME;
  const call = t.attempts.length === 0 ? o.upstreamCall : undefined;
  const server: OtlpSpan = {
    traceId: t.traceId,
    spanId: t.serverSpanId,
    name,
    kind: SPAN_KIND_SERVER,
    startTimeUnixNano: unixNano(t.startWall, 0),
    endTimeUnixNano: unixNano(t.startWall, end),
    attributes: t.attempts.length === 0 && !call
      ? eventAttributes(t, o, opts, undefined, true)
      : structural(t, o, opts, o.status),
    status: statusOf(o.status),
    flags: remote ? flags | FLAG_IS_REMOTE | (remote.flags & FLAG_RANDOM) : flags,
  };
  if (remote) server.parentSpanId = remote.parentSpanId;
  if (remote?.traceState) server.traceState = remote.traceState;
  if (call) {
    // A tool or agent call: one CLIENT span over its upstream request, carrying the event set (AISIX's shape).
    const start = Math.min(Math.max(0, call.start), end);
    return [server, {
      traceId: t.traceId,
      spanId: t.logicalSpanId,
      parentSpanId: t.serverSpanId,
      name,
      kind: SPAN_KIND_CLIENT,
      startTimeUnixNano: unixNano(t.startWall, start),
      endTimeUnixNano: unixNano(t.startWall, Math.min(Math.max(start, call.end), end)),
      attributes: eventAttributes(t, o, opts, undefined, true),
      status: statusOf(o.status),
      flags,
    }];
  }
  if (t.attempts.length === 0) return [server];
  const first = t.attempts[0]!;
  const spans: OtlpSpan[] = [server, {
    traceId: t.traceId,
    spanId: t.logicalSpanId,
    parentSpanId: t.serverSpanId,
    name,
    kind: SPAN_KIND_CLIENT,
    startTimeUnixNano: unixNano(t.startWall, first.start),
    endTimeUnixNano: unixNano(t.startWall, Math.max(...t.attempts.map((a) => a.end ?? end))),
    attributes: structural(t, o, opts, o.status),
    status: statusOf(o.status),
    flags,
  }];
  const serving = t.serving;
  for (const at of t.attempts) {
    spans.push({
      traceId: t.traceId,
      spanId: at.spanId,
      parentSpanId: t.logicalSpanId,
      name,
      kind: SPAN_KIND_CLIENT,
      startTimeUnixNano: unixNano(t.startWall, at.start),
      endTimeUnixNano: unixNano(t.startWall, at.end ?? end),
      attributes: eventAttributes(t, o, opts, at, at === serving),
      status: statusOf(at.status ?? (at === serving ? o.status : undefined)),
      flags,
    });
  }
  return spans;
}
