// AISIX's usage event (docs/usage-events.md "Fields"): one per upstream attempt on chat, messages and
// responses, one per request elsewhere, built from a finished request's facts. Members are declared in
// AISIX's order and an absent one is left out, so `JSON.stringify` gives AISIX's serialization.
import type { Hit } from '../guardrails/chain.ts';
import type { ProviderKey } from '../resources/schema.ts';
import type { AttemptFact } from '../routing/dispatch-types.ts';
import { cleanText } from './client-type.ts';
import type { CallUsage, UsageFacts, UsagePart } from './facts.ts';

export interface UsageEvent {
  request_id: string;
  trace_id?: string;
  occurred_at: string;
  model_id: string;
  api_key_id: string;
  requested_model?: string;
  prompt_tokens: number;
  completion_tokens: number;
  cached_prompt_tokens?: number;
  reasoning_tokens?: number;
  cache_creation_tokens?: number;
  cache_read_tokens?: number;
  usage_estimated?: true;
  audio_duration_seconds?: number;
  upstream_latency_ms: number;
  upstream_ttft_ms?: number;
  downstream_latency_ms?: number;
  status_code: number;
  provider_request_id?: string;
  provider_model_version?: string;
  finish_reason?: string;
  cost_usd: number;
  guardrail_blocked: boolean;
  guardrail_bypassed_reason?: string;
  applied_guardrails?: { kind: string; hook: string }[];
  redacted_entity_counts?: Record<string, number>;
  guardrail_monitor_hits?: Hit[];
  guardrail_enforced_hits?: Hit[];
  cache_status?: string;
  cache_hit_saved_input_tokens?: number;
  cache_hit_saved_output_tokens?: number;
  cache_hit_layer?: string;
  cache_similarity?: number;
  inbound_protocol?: string;
  attempt_index: number;
  attempt_kind?: string;
  attempt_model?: string;
  error_class?: string;
  error_message?: string;
  provider_kind?: string;
  provider_featured?: true;
  branded_provider?: string;
  pk_label?: string;
  byo_label?: string;
  client_source_ip?: string;
  client_user_agent?: string;
  auth_type?: string;
  mcp_server_name?: string;
  mcp_tool_name?: string;
  a2a_agent_name?: string;
  a2a_method?: string;
  a2a_operation?: string;
  a2a_protocol_version?: string;
  a2a_task_id?: string;
  a2a_context_id?: string;
  a2a_task_state?: string;
  a2a_stream_event_count?: number;
  passthrough_route_name?: string;
  client_identity?: string;
  jwt_subject?: string;
  jwt_provider?: string;
  jwt_claim_mapping?: string;
}

/** The handlers AISIX emits one event per upstream attempt on; every other one emits one per request. */
const PER_ATTEMPT = new Set(['chat', 'messages', 'responses']);
/** The media endpoints' calls: one event per request, labelled by family (`audio`, `images`, `rerank`). */
const MEDIA_HANDLERS = [
  'audio_speech',
  'audio_transcriptions',
  'audio_translations',
  'images_generations',
  'images_edits',
  'rerank',
];
/** The model calls that emit events at all (count_tokens is not a usage AISIX records). */
export const EVENT_HANDLERS = new Set([
  'chat',
  'messages',
  'responses',
  'completions',
  'embeddings',
  ...MEDIA_HANDLERS,
]);

/** `aisix_usage_events_emitted_total`'s `handler`: a media call's family, else the call. */
export function handlerLabel(handler: string): string {
  return handler.startsWith('audio_') ? 'audio' : handler.startsWith('images_') ? 'images' : handler;
}

/** AISIX's cap on `error_message` and on the ids it records. */
const ERROR_MESSAGE_MAX = 2048;
const ID_MAX = 256;

/** `2026-05-01T12:00:00Z`: RFC 3339 UTC, whole seconds. */
export function occurredAt(ms: number): string {
  const second = Math.floor(ms / 1000);
  // Events come many per second: the string is made once per second, not per event.
  if (second !== lastSecond) {
    lastSecond = second;
    lastOccurredAt = new Date(second * 1000).toISOString().replace('.000Z', 'Z');
  }
  return lastOccurredAt;
}
let lastSecond = NaN;
let lastOccurredAt = '';

/** What the labels of `aisix_usage_events_emitted_total` / `_drops_total` read of an event. */
export interface EventLabels {
  model: string;
  providerKeyId: string;
  providerKeyName: string;
  status: number;
}

/** One request's events, terminal last. `now` is the gateway clock at the request's last byte. */
export function buildEvents(f: UsageFacts, part: UsagePart, status: number, now: number): UsageEvent[] {
  const base = common(f, part, now);
  const attempts = part.attempts ?? [];
  const perAttempt = f.handler !== undefined && PER_ATTEMPT.has(f.handler);
  const events: UsageEvent[] = [];
  if (perAttempt) {
    for (let i = 0; i < attempts.length - 1; i++) events.push(attemptEvent(base, f, attempts[i]!, i));
  }
  events.push(terminalEvent(base, f, status, now, perAttempt ? attempts.length - 1 : undefined, attempts));
  return events;
}

/** The labels of each event `buildEvents` would build, without building them (no exporter: counted only). */
export function eventLabels(f: UsageFacts, part: UsagePart, status: number): EventLabels[] {
  const model = f.model ?? 'unknown';
  const attempts = part.attempts ?? [];
  const out: EventLabels[] = [];
  if (f.handler !== undefined && PER_ATTEMPT.has(f.handler)) {
    for (let i = 0; i < attempts.length - 1; i++) {
      const a = attempts[i]!;
      out.push({
        model,
        providerKeyId: a.model.provider_key_id,
        providerKeyName: a.key.display_name,
        status: a.status,
      });
    }
  }
  const up = f.served ?? f.direct;
  out.push({
    model,
    providerKeyId: up?.model.provider_key_id ?? 'unknown',
    providerKeyName: up?.key.display_name || 'unknown',
    status: callerStatus(f, status),
  });
  return out;
}

/** The members every event of the request shares. */
function common(f: UsageFacts, part: UsagePart, now: number) {
  const g = f.guardrails;
  return {
    request_id: f.requestId,
    trace_id: f.traceId,
    occurred_at: occurredAt(now),
    api_key_id: f.apiKeyId ?? '',
    requested_model: f.asked ?? f.model,
    guardrail_blocked: g?.blocked ?? false,
    guardrail_bypassed_reason: g?.bypassed,
    applied_guardrails: g && g.applied.length > 0 ? [...g.applied] : undefined,
    redacted_entity_counts: g && Object.keys(g.counts).length > 0 ? { ...g.counts } : undefined,
    guardrail_monitor_hits: g && g.monitor.length > 0 ? g.monitor.map(monitorHit) : undefined,
    inbound_protocol: f.protocol,
    client_source_ip: part.clientIp || undefined,
    client_user_agent: part.userAgent || undefined,
    jwt_subject: f.jwt ? cleanText(f.jwt.subject, ID_MAX) : undefined,
    jwt_provider: f.jwt ? cleanText(f.jwt.provider, ID_MAX) : undefined,
    jwt_claim_mapping: f.jwt?.claimMapping !== undefined ? cleanText(f.jwt.claimMapping, ID_MAX) : undefined,
  };
}

type Common = ReturnType<typeof common>;

/** A failed (or superseded) attempt before the terminal one: its own status, no tokens. */
function attemptEvent(base: Common, f: UsageFacts, a: AttemptFact, index: number): UsageEvent {
  return shape(base, {
    model_id: a.model.id,
    prompt_tokens: 0,
    completion_tokens: 0,
    upstream_latency_ms: ms(a.durationMs),
    status_code: a.status,
    cost_usd: 0,
    attempt_index: index,
    attempt_kind: a.kind,
    attempt_model: f.routing ? a.model.display_name : undefined,
    error_class: a.errorClass,
    error_message: a.errorMessage !== undefined ? errorText(a.errorMessage) : undefined,
    ...keyTags(a.key),
  });
}

/** The event that ends the request: the answer's tokens and ids, what the caller waited, the enforced hits. */
function terminalEvent(
  base: Common,
  f: UsageFacts,
  status: number,
  now: number,
  index: number | undefined,
  attempts: readonly AttemptFact[],
): UsageEvent {
  const s = f.served;
  const up = s ?? f.direct;
  const last = attempts.length > 0 ? attempts[attempts.length - 1] : undefined;
  const u = f.usage;
  const hit = f.cache?.status === 'hit';
  const anthropicCache = u?.cacheOutsideInput ? 0 : (u?.cacheCreation ?? 0) + (u?.cacheRead ?? 0);
  const upstreamMs = hit || !s || last?.noUpstreamRequest ? 0 : f.stream ? now - s.startedAt : s.durationMs;
  const downstream = f.firstByteAt !== undefined ? f.firstByteAt - f.start : undefined;
  // The deciding attempt's own failure names it best (an unusable credential); else the request's.
  const failedKind = last?.errorClass ??
    (f.errorKind !== undefined && f.errorKind !== 'client_closed' ? f.errorKind : undefined);
  const failedText = last?.errorClass !== undefined ? last.errorMessage : f.error;
  const enforced = f.guardrails ? mergeEnforced(f.guardrails.enforced) : [];
  const c = f.cache;
  const saved = hit ? c?.saved : undefined;
  // AISIX writes `disabled` on a chat answer its cache gate never opened for (no policy applied, or a stream);
  // an error before or instead of an upstream answer has no status.
  const answered = s !== undefined && last?.errorClass === undefined && !last?.noUpstreamRequest &&
    (status < 400 || f.guardrails?.blocked === true);
  const cacheStatus = c?.status ?? (f.handler === 'chat' && answered ? 'disabled' : undefined);
  return shape(base, {
    model_id: up?.model.id ?? '',
    prompt_tokens: Math.max(0, (u?.input ?? 0) - anthropicCache),
    completion_tokens: u?.output ?? 0,
    cached_prompt_tokens: nonZero(u?.cachedPrompt),
    reasoning_tokens: nonZero(u?.reasoning),
    cache_creation_tokens: nonZero(u?.cacheCreation),
    cache_read_tokens: nonZero(u?.cacheRead),
    usage_estimated: u?.estimated ? true : undefined,
    audio_duration_seconds: nonZero(f.audioSeconds),
    upstream_latency_ms: ms(upstreamMs),
    upstream_ttft_ms: f.stream && !hit ? nonZero(ms(f.upstreamTtftMs ?? 0)) : undefined,
    downstream_latency_ms: downstream !== undefined ? nonZero(ms(downstream)) : undefined,
    status_code: callerStatus(f, status),
    provider_request_id: hit || !f.providerRequestId ? undefined : cleanText(f.providerRequestId, ID_MAX),
    provider_model_version: hit ? undefined : s?.upstreamModel,
    finish_reason: f.finishReason,
    cost_usd: hit || !u ? 0 : costUsd(up?.model.cost, u),
    guardrail_enforced_hits: enforced.length > 0 ? enforced : undefined,
    cache_status: cacheStatus,
    cache_hit_saved_input_tokens: nonZero(saved?.input),
    cache_hit_saved_output_tokens: nonZero(saved?.output),
    cache_hit_layer: hit ? c?.layer : undefined,
    cache_similarity: hit ? c?.similarity : undefined,
    attempt_index: index ?? (s ? s.attempts - 1 : 0),
    attempt_kind: hit ? undefined : last?.kind ?? s?.kind,
    attempt_model: f.routing && s && !hit ? s.model.display_name : undefined,
    error_class: failedKind,
    error_message: failedKind !== undefined && failedText !== undefined ? errorText(failedText) : undefined,
    ...keyTags(up?.key),
  });
}

/**
 * The one event of a tool or agent call (docs/usage-events.md "Tool and agent calls"): no model, no provider,
 * cost 0; the surface's own fields and the caller's status. A call that talks to one model (a Realtime session)
 * names it and is priced at its `cost`.
 */
export function callEvent(f: UsageFacts, part: UsagePart, call: CallUsage, status: number, now: number): UsageEvent {
  const t = call.tokens;
  const enforced = f.guardrails ? mergeEnforced(f.guardrails.enforced) : [];
  const model = f.direct?.model;
  return shape(common(f, part, now), {
    model_id: model?.id ?? '',
    prompt_tokens: t?.input ?? 0,
    completion_tokens: t?.output ?? 0,
    cached_prompt_tokens: nonZero(t?.cached),
    usage_estimated: t?.estimated ? true : undefined,
    upstream_latency_ms: ms(call.upstreamMs),
    downstream_latency_ms: nonZero(ms(call.downstreamMs ?? call.upstreamMs)),
    status_code: call.status ?? status,
    cost_usd: model && t ? costUsd(model.cost, t) : 0,
    guardrail_enforced_hits: enforced.length > 0 ? enforced : undefined,
    inbound_protocol: call.protocol,
    attempt_index: 0,
    ...call.fields,
  });
}

/** The status the caller got; a stream the caller left before its end is AISIX's 499. */
function callerStatus(f: UsageFacts, status: number): number {
  return f.stream && f.errorKind === 'client_closed' ? 499 : status;
}

/** The shared and the event's own members, in AISIX's order; absent ones left out. */
function shape(base: Common, own: Partial<UsageEvent>): UsageEvent {
  const e: Record<string, unknown> = {};
  for (const k of ORDER) {
    const v = k in own ? own[k] : (base as Record<string, unknown>)[k];
    if (v !== undefined && v !== '') e[k] = v;
  }
  // Always present (AISIX serializes them even when empty).
  e.model_id ??= '';
  e.api_key_id ??= '';
  return e as unknown as UsageEvent;
}

const ORDER: readonly (keyof UsageEvent)[] = [
  'request_id',
  'trace_id',
  'occurred_at',
  'model_id',
  'api_key_id',
  'requested_model',
  'prompt_tokens',
  'completion_tokens',
  'cached_prompt_tokens',
  'reasoning_tokens',
  'cache_creation_tokens',
  'cache_read_tokens',
  'usage_estimated',
  'audio_duration_seconds',
  'upstream_latency_ms',
  'upstream_ttft_ms',
  'downstream_latency_ms',
  'status_code',
  'provider_request_id',
  'provider_model_version',
  'finish_reason',
  'cost_usd',
  'guardrail_blocked',
  'guardrail_bypassed_reason',
  'applied_guardrails',
  'redacted_entity_counts',
  'guardrail_monitor_hits',
  'guardrail_enforced_hits',
  'cache_status',
  'cache_hit_saved_input_tokens',
  'cache_hit_saved_output_tokens',
  'cache_hit_layer',
  'cache_similarity',
  'inbound_protocol',
  'attempt_index',
  'attempt_kind',
  'attempt_model',
  'error_class',
  'error_message',
  'provider_kind',
  'provider_featured',
  'branded_provider',
  'pk_label',
  'byo_label',
  'auth_type',
  'client_source_ip',
  'client_user_agent',
  'mcp_server_name',
  'mcp_tool_name',
  'a2a_agent_name',
  'a2a_method',
  'a2a_operation',
  'a2a_protocol_version',
  'a2a_task_id',
  'a2a_context_id',
  'a2a_task_state',
  'a2a_stream_event_count',
  'passthrough_route_name',
  'client_identity',
  'jwt_subject',
  'jwt_provider',
  'jwt_claim_mapping',
];

function monitorHit(h: Hit): Hit {
  const out: Hit = { guardrail_name: h.guardrail_name, hook: h.hook, action: h.action };
  if (h.reason !== undefined) out.reason = h.reason;
  if (h.counts && Object.keys(h.counts).length > 0) out.counts = { ...h.counts };
  return out;
}

/** One entry per (name, hook, action, error_type), counts and microseconds summed (a stream's windows). */
function mergeEnforced(hits: readonly Hit[]): Hit[] {
  const by = new Map<string, Hit>();
  for (const h of hits) {
    const key = `${h.guardrail_name}\u0000${h.hook}\u0000${h.action}\u0000${h.error_type ?? ''}`;
    let m = by.get(key);
    if (!m) {
      m = { guardrail_name: h.guardrail_name, hook: h.hook, action: h.action };
      if (h.error_type !== undefined) m.error_type = h.error_type;
      by.set(key, m);
    }
    if (h.counts) {
      const counts = m.counts ??= {};
      for (const [k, n] of Object.entries(h.counts)) counts[k] = (counts[k] ?? 0) + n;
    }
    if (h.duration_us !== undefined) m.duration_us = (m.duration_us ?? 0) + h.duration_us;
  }
  return [...by.values()];
}

/**
 * USD at the model's `cost` (per 1K input / output tokens). Sluice prices every endpoint, where AISIX writes 0
 * outside realtime (docs/aisix-compatibility.md).
 */
function costUsd(cost: Record<string, number> | undefined, u: { input?: number; output?: number }): number {
  if (!cost) return 0;
  const usd = ((u.input ?? 0) * (cost.input_per_1k ?? 0) + (u.output ?? 0) * (cost.output_per_1k ?? 0)) / 1000;
  return Math.round(usd * 1_000_000) / 1_000_000;
}

/** The provider key's `telemetry_tags` under the event's names; each text without control characters, capped. */
function keyTags(key: Pick<ProviderKey, 'telemetry_tags'> | undefined): Partial<UsageEvent> {
  const t = key?.telemetry_tags;
  if (!t) return {};
  const text = (v: string | undefined) => v !== undefined ? cleanText(v, ID_MAX) : undefined;
  return {
    provider_kind: t.kind,
    provider_featured: t.featured ? true : undefined,
    branded_provider: text(t.branded_provider),
    pk_label: text(t.pk_label),
    byo_label: text(t.byo_label),
  };
}

function errorText(s: string): string {
  return cleanText(s, ERROR_MESSAGE_MAX);
}

function ms(v: number): number {
  return Math.max(0, Math.round(v));
}

function nonZero(v: number | undefined): number | undefined {
  return v ? v : undefined;
}
