// What the usage events read of one finished request (docs/usage-events.md): the request's record gives these
// facts once its last byte is out (src/proxy/record.ts `usageFacts`), and the usage part of the record holds
// what the record does not: the caller's user agent and address, and each upstream attempt. Shapes only, so
// this folder never imports the proxy.
import type { Hit } from '../guardrails/chain.ts';
import type { AttemptFact, ServedBy } from '../routing/dispatch-types.ts';

/** The tokens an answer used, as the record holds them (src/proxy/usage.ts `Usage`). */
export interface UsedTokens {
  input?: number;
  output?: number;
  total?: number;
  estimated?: boolean;
  cacheCreation?: number;
  cacheRead?: number;
  /** The two cache counts are beside `input`, not part of it. */
  cacheOutsideInput?: true;
  cachedPrompt?: number;
  reasoning?: number;
}

/** The guardrails' part of the record (src/proxy/guardrail-record.ts). */
export interface GuardrailFacts {
  blocked: boolean;
  bypassed: string | undefined;
  applied: readonly { kind: string; hook: string }[];
  monitor: readonly Hit[];
  enforced: readonly Hit[];
  counts: Readonly<Record<string, number>>;
}

/** The cache's part of the record (src/proxy/cache-record.ts). */
export interface CacheFacts {
  status: 'hit' | 'miss' | 'bypass';
  layer: 'exact' | 'semantic' | undefined;
  similarity: number | undefined;
  saved: { input: number; output: number } | undefined;
}

/** Who a JWT-authenticated caller's token named (src/identity/authenticate.ts `JwtIdentity`). */
export interface JwtFacts {
  readonly subject: string;
  readonly provider: string;
  /** Absent for a key the subject is bound to directly. */
  readonly claimMapping?: string;
}

/** One finished request as the record saw it. Times are the gateway clock's milliseconds. */
export interface UsageFacts {
  readonly requestId: string;
  readonly start: number;
  /** The route's kind of call (`chat`, `messages`, …); undefined for a path that is no model call. */
  readonly handler: string | undefined;
  readonly protocol: 'openai' | 'anthropic';
  /** The configured model name the request resolved to (a wildcard hit: the row's name). */
  readonly model: string | undefined;
  /** The model as the caller wrote it. */
  readonly asked: string | undefined;
  readonly routing: boolean;
  readonly apiKeyId: string | undefined;
  readonly stream: boolean;
  /** The upstream that served the request, or failed it last. */
  readonly served: ServedBy | undefined;
  /** A direct model's own upstream, when the dispatcher said nothing more. */
  readonly direct: Pick<ServedBy, 'model' | 'key' | 'upstreamModel'> | undefined;
  readonly usage: UsedTokens | undefined;
  readonly providerRequestId: string | undefined;
  readonly finishReason: string | undefined;
  /** The access log's `error_kind` and `error`. */
  readonly errorKind: string | undefined;
  readonly error: string | undefined;
  readonly firstByteAt: number | undefined;
  readonly upstreamTtftMs: number | undefined;
  readonly guardrails: GuardrailFacts | undefined;
  readonly cache: CacheFacts | undefined;
  readonly traceId: string | undefined;
  /** The audio a transcription or translation covered (the media part of the record). */
  readonly audioSeconds?: number;
  /** The JWT that selected the caller's key; undefined for a plaintext key. */
  readonly jwt?: JwtFacts;
}

/**
 * A call that is no model call and still leaves a usage record (an MCP tool call, an A2A call): its handler says
 * what it was, and the usage hooks build its one event (docs/usage-events.md "Tool and agent calls").
 */
export interface CallUsage {
  /** `aisix_usage_events_emitted_total`'s `handler` label (`mcp`, `a2a`). */
  readonly handler: string;
  /** The event's `inbound_protocol`. */
  readonly protocol: string;
  /** The counters' `inbound_protocol` label, when AISIX's bounded set lacks the protocol (`other`). */
  readonly protocolLabel?: string;
  /** The surface's own fields (`mcp_server_name`, `a2a_agent_name`, …), in AISIX's order; undefined: omitted. */
  fields: Record<string, string | number | undefined>;
  /** Time spent on the upstream (0 when refused before it). */
  upstreamMs: number;
  /** Request receipt to the answer's end, when it is not `upstreamMs`. */
  downstreamMs?: number;
  /** The status the call's record states, when it is not the HTTP status (an abandoned A2A stream's 499). */
  status?: number;
  /** The tokens, when the surface estimates some (A2A) or its upstream reports them (Realtime); a tool call has none. */
  tokens?: { input: number; output: number; estimated: boolean; cached?: number };
}

/**
 * The usage events' part of a request's record (a `RecordFacet` of src/proxy/record-facet.ts, structurally): made
 * when the request's record is, by the usage hooks. No access-log fields of its own.
 */
export class UsagePart {
  /** The cleaned user agent (`client_user_agent`) and its `client_type`. */
  userAgent = '';
  clientType = 'unknown';
  /** The caller's address as `proxy.real_ip` resolves it; only when some exporter takes events. */
  clientIp: string | undefined = undefined;
  /** Each finished upstream attempt, in order; undefined when no exporter takes events (none are kept). */
  attempts: AttemptFact[] | undefined = undefined;
  /** The largest `content_max_bytes` of the exporters that capture content; undefined: none does. */
  captureBytes: number | undefined = undefined;
  /** The prompt as sent upstream and the text the caller received (only with `captureBytes`). */
  prompt: string | undefined = undefined;
  completion: string | undefined = undefined;
  /** Why the model stopped, as the answer said; read only while some exporter takes events (src/usage/watch.ts). */
  finishReason: string | undefined = undefined;
  /** Set by the handler of a tool or agent call that leaves a usage record; undefined elsewhere. */
  call: CallUsage | undefined = undefined;
  /** Dispatch's per-attempt callback (`DispatchInput.onAttempt`); undefined when nothing keeps attempts. */
  attempt: ((a: AttemptFact) => void) | undefined = undefined;

  /** Keep each attempt from now on. */
  keepAttempts(): void {
    const list: AttemptFact[] = this.attempts = [];
    this.attempt = (a) => list.push(a);
  }

  accessLogValues(): readonly unknown[] {
    return NONE;
  }
}

const NONE: readonly unknown[] = [];

/** The usage part's entry (a `RecordPart`): not in the access log. */
export const USAGE_PART = {
  name: 'usage',
  fields: NONE as readonly string[],
  create: (): UsagePart => new UsagePart(),
};
