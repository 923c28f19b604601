// AISIX's usage event (docs/usage-events.md "Fields"): one per upstream attempt on chat, messages and
// responses, one per request elsewhere, built from a finished request's facts. Every event has every member,
// declared in AISIX's order; the exporters write those set, in that order (src/usage/datadog.ts, sls.ts).
import type { Hit } from '../guardrails/chain.ts';
import type { ProviderKey } from '../resources/schema.ts';
import type { AttemptFact } from '../routing/dispatch-types.ts';
import { cleanText } from './client-type.ts';
import type { CallUsage, UsageFacts, UsagePart } from './facts.ts';

/**
 * One event. Every member is declared here, in AISIX's order (`EVENT_MEMBERS`), so every event has one shape; a member
 * left undefined (or empty) is absent from what the exporters write.
 */
export class UsageEvent {
  /** No value at run time; it makes the type nominal, so only a `UsageEvent` (one shape, AISIX's order) passes. */
  declare private readonly nominal: never;
  request_id: string = '';
  trace_id?: string = undefined;
  occurred_at: string = '';
  model_id: string = '';
  api_key_id: string = '';
  requested_model?: string = undefined;
  prompt_tokens: number = 0;
  completion_tokens: number = 0;
  cached_prompt_tokens?: number = undefined;
  reasoning_tokens?: number = undefined;
  cache_creation_tokens?: number = undefined;
  cache_read_tokens?: number = undefined;
  usage_estimated?: true = undefined;
  audio_duration_seconds?: number = undefined;
  upstream_latency_ms: number = 0;
  upstream_ttft_ms?: number = undefined;
  downstream_latency_ms?: number = undefined;
  status_code: number = 0;
  provider_request_id?: string = undefined;
  provider_model_version?: string = undefined;
  finish_reason?: string = undefined;
  cost_usd: number = 0;
  guardrail_blocked: boolean = false;
  guardrail_bypassed_reason?: string = undefined;
  applied_guardrails?: { kind: string; hook: string }[] = undefined;
  redacted_entity_counts?: Record<string, number> = undefined;
  guardrail_monitor_hits?: Hit[] = undefined;
  guardrail_enforced_hits?: Hit[] = undefined;
  cache_status?: string = undefined;
  cache_hit_saved_input_tokens?: number = undefined;
  cache_hit_saved_output_tokens?: number = undefined;
  cache_hit_layer?: string = undefined;
  cache_similarity?: number = undefined;
  inbound_protocol?: string = undefined;
  attempt_index: number = 0;
  attempt_kind?: string = undefined;
  attempt_model?: string = undefined;
  error_class?: string = undefined;
  error_message?: string = undefined;
  provider_kind?: string = undefined;
  provider_featured?: true = undefined;
  branded_provider?: string = undefined;
  pk_label?: string = undefined;
  byo_label?: string = undefined;
  auth_type?: string = undefined;
  client_source_ip?: string = undefined;
  client_user_agent?: string = undefined;
  mcp_server_name?: string = undefined;
  mcp_tool_name?: string = undefined;
  a2a_agent_name?: string = undefined;
  a2a_method?: string = undefined;
  a2a_operation?: string = undefined;
  a2a_protocol_version?: string = undefined;
  a2a_task_id?: string = undefined;
  a2a_context_id?: string = undefined;
  a2a_task_state?: string = undefined;
  a2a_stream_event_count?: number = undefined;
  passthrough_route_name?: string = undefined;
  client_identity?: string = undefined;
  jwt_subject?: string = undefined;
  jwt_provider?: string = undefined;
  jwt_claim_mapping?: string = undefined;
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
  const attempts = part.attempts ?? [];
  const perAttempt = f.handler !== undefined && PER_ATTEMPT.has(f.handler);
  const events: UsageEvent[] = [];
  if (perAttempt) {
    for (let i = 0; i < attempts.length - 1; i++) events.push(attemptEvent(common(f, part, now), f, attempts[i]!, i));
  }
  const index = perAttempt ? attempts.length - 1 : undefined;
  events.push(terminalEvent(common(f, part, now), f, status, now, index, attempts));
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

/** A new event with the members every event of the request shares. */
function common(f: UsageFacts, part: UsagePart, now: number): UsageEvent {
  const g = f.guardrails;
  const e = new UsageEvent();
  e.request_id = f.requestId;
  e.trace_id = f.traceId;
  e.occurred_at = occurredAt(now);
  e.api_key_id = f.apiKeyId ?? '';
  e.requested_model = f.asked ?? f.model;
  e.guardrail_blocked = g?.blocked ?? false;
  e.guardrail_bypassed_reason = g?.bypassed;
  if (g) {
    if (g.applied.length > 0) e.applied_guardrails = [...g.applied];
    if (Object.keys(g.counts).length > 0) e.redacted_entity_counts = { ...g.counts };
    if (g.monitor.length > 0) e.guardrail_monitor_hits = g.monitor.map(monitorHit);
  }
  e.inbound_protocol = f.protocol;
  e.client_source_ip = part.clientIp || undefined;
  e.client_user_agent = part.userAgent || undefined;
  if (f.jwt) {
    e.jwt_subject = cleanText(f.jwt.subject, ID_MAX);
    e.jwt_provider = cleanText(f.jwt.provider, ID_MAX);
    if (f.jwt.claimMapping !== undefined) e.jwt_claim_mapping = cleanText(f.jwt.claimMapping, ID_MAX);
  }
  return e;
}

/** A failed (or superseded) attempt before the terminal one: its own status, no tokens. */
function attemptEvent(e: UsageEvent, f: UsageFacts, a: AttemptFact, index: number): UsageEvent {
  e.model_id = a.model.id;
  e.upstream_latency_ms = ms(a.durationMs);
  e.status_code = a.status;
  e.attempt_index = index;
  e.attempt_kind = a.kind;
  if (f.routing) e.attempt_model = a.model.display_name;
  e.error_class = a.errorClass;
  if (a.errorMessage !== undefined) e.error_message = errorText(a.errorMessage);
  keyTags(e, a.key);
  return e;
}

/** The event that ends the request: the answer's tokens and ids, what the caller waited, the enforced hits. */
function terminalEvent(
  e: UsageEvent,
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
  const c = f.cache;
  const saved = hit ? c?.saved : undefined;
  // AISIX writes `disabled` on a chat answer its cache gate never opened for (no policy applied, or a stream);
  // an error before or instead of an upstream answer has no status.
  const answered = s !== undefined && last?.errorClass === undefined && !last?.noUpstreamRequest &&
    (status < 400 || f.guardrails?.blocked === true);
  e.model_id = up?.model.id ?? '';
  e.prompt_tokens = Math.max(0, (u?.input ?? 0) - anthropicCache);
  e.completion_tokens = u?.output ?? 0;
  e.cached_prompt_tokens = nonZero(u?.cachedPrompt);
  e.reasoning_tokens = nonZero(u?.reasoning);
  e.cache_creation_tokens = nonZero(u?.cacheCreation);
  e.cache_read_tokens = nonZero(u?.cacheRead);
  if (u?.estimated) e.usage_estimated = true;
  e.audio_duration_seconds = nonZero(f.audioSeconds);
  e.upstream_latency_ms = ms(upstreamMs);
  if (f.stream && !hit) e.upstream_ttft_ms = nonZero(ms(f.upstreamTtftMs ?? 0));
  if (downstream !== undefined) e.downstream_latency_ms = nonZero(ms(downstream));
  e.status_code = callerStatus(f, status);
  if (!hit && f.providerRequestId) e.provider_request_id = cleanText(f.providerRequestId, ID_MAX);
  if (!hit) e.provider_model_version = s?.upstreamModel;
  e.finish_reason = f.finishReason;
  e.cost_usd = hit || !u ? 0 : costUsd(up?.model.cost, u);
  enforcedHits(e, f);
  e.cache_status = c?.status ?? (f.handler === 'chat' && answered ? 'disabled' : undefined);
  e.cache_hit_saved_input_tokens = nonZero(saved?.input);
  e.cache_hit_saved_output_tokens = nonZero(saved?.output);
  if (hit) {
    e.cache_hit_layer = c?.layer;
    e.cache_similarity = c?.similarity;
  }
  e.attempt_index = index ?? (s ? s.attempts - 1 : 0);
  if (!hit) e.attempt_kind = last?.kind ?? s?.kind;
  if (f.routing && s && !hit) e.attempt_model = s.model.display_name;
  e.error_class = failedKind;
  if (failedKind !== undefined && failedText !== undefined) e.error_message = errorText(failedText);
  keyTags(e, up?.key);
  return e;
}

/**
 * The one event of a tool or agent call (docs/usage-events.md "Tool and agent calls"): no model, no provider,
 * cost 0; the surface's own fields and the caller's status. A call that talks to one model (a Realtime session)
 * names it and is priced at its `cost`.
 */
export function callEvent(f: UsageFacts, part: UsagePart, call: CallUsage, status: number, now: number): UsageEvent {
  const t = call.tokens;
  const model = f.direct?.model;
  const e = common(f, part, now);
  e.model_id = model?.id ?? '';
  e.prompt_tokens = t?.input ?? 0;
  e.completion_tokens = t?.output ?? 0;
  e.cached_prompt_tokens = nonZero(t?.cached);
  if (t?.estimated) e.usage_estimated = true;
  e.upstream_latency_ms = ms(call.upstreamMs);
  e.downstream_latency_ms = nonZero(ms(call.downstreamMs ?? call.upstreamMs));
  e.status_code = call.status ?? status;
  e.cost_usd = model && t ? costUsd(model.cost, t) : 0;
  enforcedHits(e, f);
  e.inbound_protocol = call.protocol;
  e.attempt_index = 0;
  // The surface's own members (mcp_*, a2a_*, …), set last as they name themselves.
  const to = e as unknown as Record<string, unknown>;
  for (const [k, v] of Object.entries(call.fields)) to[k] = v;
  return e;
}

/** The guardrails' enforced hits, merged, when there are any. */
function enforcedHits(e: UsageEvent, f: UsageFacts): void {
  const enforced = f.guardrails ? mergeEnforced(f.guardrails.enforced) : [];
  if (enforced.length > 0) e.guardrail_enforced_hits = enforced;
}

/** The status the caller got; a stream the caller left before its end is AISIX's 499. */
function callerStatus(f: UsageFacts, status: number): number {
  return f.stream && f.errorKind === 'client_closed' ? 499 : status;
}

/** The members of an event, in AISIX's order: the order the exporters write them in. */
export const EVENT_MEMBERS: readonly (keyof UsageEvent)[] = Object.keys(new UsageEvent()) as (keyof UsageEvent)[];

/** `e`'s values in `EVENT_MEMBERS`' order (one pass over its one shape; no lookup by name). */
export function memberValues(e: UsageEvent): unknown[] {
  return Object.values(e);
}

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
function keyTags(e: UsageEvent, key: Pick<ProviderKey, 'telemetry_tags'> | undefined): void {
  const t = key?.telemetry_tags;
  if (!t) return;
  const text = (v: string | undefined) => v !== undefined ? cleanText(v, ID_MAX) : undefined;
  e.provider_kind = t.kind;
  if (t.featured) e.provider_featured = true;
  e.branded_provider = text(t.branded_provider);
  e.pk_label = text(t.pk_label);
  e.byo_label = text(t.byo_label);
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
