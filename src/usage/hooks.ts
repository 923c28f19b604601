// Usage events and client dimensions join the tracking middleware as its begin and end hooks (docs/usage-events.md):
// at a request's start its user agent is classified (and, when an exporter takes events, its client address kept
// and its attempts recorded); once its last byte is out its tokens are counted by client and its events are
// counted, then handed to the exporters or, with none, counted as dropped (`sink_disabled`, AISIX's standalone
// series) without being built.
import { type BoundCounter, type Counter, LabelIndex, statusClass } from '../observability/metrics.ts';
import { cleanUserAgent, ClientTypeClassifier, type ClientTypeRule } from './client-type.ts';
import { buildEvents, callEvent, EVENT_HANDLERS, type EventLabels, eventLabels, handlerLabel } from './event.ts';
import { type CallUsage, USAGE_PART, type UsageFacts, type UsagePart } from './facts.ts';
import type { UsageMetrics } from './metrics.ts';
import type { UsageSinks } from './sinks.ts';
import { UsageWatch } from './watch.ts';

/** The part of a proxy request's record the usage hooks read (src/proxy/record.ts). */
export interface UsageRecordView {
  readonly peer: string | undefined;
  /** The route's kind of call, when the path names a route. */
  readonly route?: { readonly call?: string };
  facet<F extends { accessLogValues(): readonly unknown[] }>(
    part: { readonly name: string; readonly fields: readonly string[]; create(): F },
  ): F;
  usageFacts(traceId?: string): UsageFacts;
}

export interface UsageHooksDeps {
  metrics: UsageMetrics;
  /** `aisix_usage_events_emitted_total` (the gateway's family). */
  emitted: Counter;
  /** The exporters; absent or inactive: events are counted, never built. */
  sinks?: Pick<UsageSinks, 'active' | 'offer' | 'captureBytes'>;
  clientTypeRules: readonly ClientTypeRule[];
  /** `(peer, headers) → client address` under `proxy.real_ip` (src/proxy/client-ip.ts). */
  clientIp: (peer: string | undefined, headers: Headers) => string | undefined;
  /** The gateway's clock (ms since the epoch). */
  clock: () => number;
}

export function usageHooks(d: UsageHooksDeps) {
  const classifier = new ClientTypeClassifier(d.clientTypeRules);
  const m = d.metrics;
  const byClient = new LabelIndex((l) => new ClientTokens(m.tokensByClient, [...l]));
  /**
   * A tool or agent call's one event: no model or provider key to label it with (AISIX's `unknown`), but for a
   * call that talks to one model (a Realtime session).
   */
  const emitCall = (f: UsageFacts, part: UsagePart, call: CallUsage, status: number): void => {
    const up = f.direct;
    const target = up ? [f.model ?? 'unknown', up.model.provider_key_id, up.key.display_name || 'unknown'] : UNKNOWN;
    const labels = [call.handler, statusClass(call.status ?? status), call.protocolLabel ?? call.protocol, ...target];
    d.emitted.inc(labels);
    const sinks = d.sinks;
    if (!sinks?.active) return m.drops.inc(['sink_disabled', ...target]);
    for (const reason of sinks.offer(callEvent(f, part, call, status, d.clock()), undefined)) {
      m.drops.inc([reason, ...target]);
    }
  };
  return {
    begin(rec: UsageRecordView, headers: Headers): UsageWatch | undefined {
      const part = rec.facet(USAGE_PART);
      part.userAgent = cleanUserAgent(headers.get('user-agent'));
      part.clientType = classifier.classify(part.userAgent);
      // Attempts are kept on every request: each is an event `aisix_usage_events_emitted_total` counts.
      part.keepAttempts();
      if (d.sinks?.active) {
        part.captureBytes = d.sinks.captureBytes;
        part.clientIp = d.clientIp(rec.peer, headers);
        return new UsageWatch(part, rec.route?.call ?? '');
      }
      return undefined;
    },
    end(rec: UsageRecordView, status: number, _own: unknown, watch: { readonly traceId?: string } | undefined): void {
      const f = rec.usageFacts(watch?.traceId);
      const call = rec.facet(USAGE_PART).call;
      if (call && f.apiKeyId !== undefined) return emitCall(f, rec.facet(USAGE_PART), call, status);
      // Authentication failures and paths that are no model call leave no usage behind (AISIX's).
      if (f.apiKeyId === undefined || f.handler === undefined || !EVENT_HANDLERS.has(f.handler)) return;
      const part = rec.facet(USAGE_PART);
      countByClient(byClient, part.clientType, f);
      const sinks = d.sinks;
      if (!sinks?.active) {
        for (const l of eventLabels(f, part, status)) {
          d.emitted.inc(emittedLabels(f, l));
          m.drops.inc(['sink_disabled', l.model, l.providerKeyId, l.providerKeyName]);
        }
        return;
      }
      const events = buildEvents(f, part, status, d.clock());
      const labels = eventLabels(f, part, status);
      // Content rides the terminal event; a request refused as unauthorized or forbidden carries none (AISIX's).
      const content = part.prompt !== undefined && status !== 401 && status !== 403
        ? { prompt: part.prompt, response: part.completion ?? '' }
        : undefined;
      for (let i = 0; i < events.length; i++) {
        const l = labels[i]!;
        d.emitted.inc(emittedLabels(f, l));
        for (const reason of sinks.offer(events[i]!, i === events.length - 1 ? content : undefined)) {
          m.drops.inc([reason, l.model, l.providerKeyId, l.providerKeyName]);
        }
      }
    },
  };
}

const UNKNOWN = ['unknown', 'unknown', 'unknown'] as const;

/** `aisix_usage_events_emitted_total`'s labels: handler, status class, inbound protocol, model, provider key. */
function emittedLabels(f: UsageFacts, l: EventLabels): string[] {
  return [
    handlerLabel(f.handler ?? 'other'),
    statusClass(l.status),
    f.protocol,
    l.model,
    l.providerKeyId,
    l.providerKeyName,
  ];
}

/**
 * `aisix_llm_tokens_by_client_total`: input (the prompt without Anthropic's cache counters), output, and the
 * cache-inclusive total; a zero is not counted. The model is the configured name the request resolved to.
 */
function countByClient(byClient: LabelIndex<ClientTokens>, clientType: string, f: UsageFacts): void {
  const u = f.usage;
  if (!u) return;
  const cache = (u.cacheCreation ?? 0) + (u.cacheRead ?? 0);
  const input = u.cacheOutsideInput ? (u.input ?? 0) : Math.max(0, (u.input ?? 0) - cache);
  const output = u.output ?? 0;
  byClient.get([clientType, f.model ?? 'unresolved']).count(input, output, input + output + cache);
}

/**
 * One client type's and model's three series, found by one lookup: each bound (so created, as an `inc` would
 * create it) on its first count above zero.
 */
class ClientTokens {
  #input?: BoundCounter;
  #output?: BoundCounter;
  #total?: BoundCounter;
  constructor(private readonly c: Counter, private readonly l: readonly string[]) {}
  count(input: number, output: number, total: number): void {
    if (input > 0) (this.#input ??= this.c.bind([...this.l, 'input'])).inc(input);
    if (output > 0) (this.#output ??= this.c.bind([...this.l, 'output'])).inc(output);
    if (total > 0) (this.#total ??= this.c.bind([...this.l, 'total'])).inc(total);
  }
}

export type { UsagePart };
