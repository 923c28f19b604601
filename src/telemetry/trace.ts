// One request's trace (docs/operations.md "Tracing"): the ids minted at arrival, the clock, the upstream
// attempts as the dispatcher makes them, and what the request path learned by its end. AISIX's hierarchy:
// a SERVER span for the request, one logical CLIENT span under it, one CLIENT span per upstream attempt
// under that. Spans are built from it once, when the last byte is out (spans.ts).
import { formatTraceparent, randomHexId, type RemoteContext } from './context.ts';

/** Milliseconds: `wall` read once per request, `mono` for the offsets (children stay inside parents). */
export interface TraceClock {
  wall(): number;
  mono(): number;
}

export const systemTraceClock: TraceClock = { wall: () => Date.now(), mono: () => performance.now() };

/** AISIX's attempt kinds: the first try, a try on the same target, a try on another target. */
export type AttemptKind = 'initial' | 'retry' | 'fallback';

/** AISIX's `aisix.error_class` values Sluice produces. */
export type ErrorClass =
  | 'timeout'
  | 'upstream_status'
  | 'upstream_decode'
  | 'upstream_in_band'
  | 'transport'
  | 'stream_aborted'
  | 'rate_limit_exceeded'
  | 'invalid_credentials'
  | 'config';

/** One upstream try. Times are ms since the request's start. */
export class AttemptSpan {
  readonly spanId = randomHexId(8);
  end: number | undefined = undefined;
  status: number | undefined = undefined;
  errorClass: ErrorClass | undefined = undefined;
  errorMessage: string | undefined = undefined;
  /** Attempt start → first SSE frame (streamed attempts). */
  ttftMs: number | undefined = undefined;

  constructor(
    readonly trace: RequestTrace,
    readonly index: number,
    readonly kind: AttemptKind,
    /** The target's id (a retry is an attempt on the same target as the one before). */
    readonly targetId: string,
    /** The routing target's name (empty for a direct model). */
    readonly model: string,
    readonly provider: string,
    /** The upstream host (`server.address`) and port, when known. */
    readonly serverAddress: string | undefined,
    readonly serverPort: number | undefined,
    readonly start: number,
  ) {}

  /** The `traceparent` the upstream request carries: this span as its parent. */
  get traceparent(): string {
    return formatTraceparent(this.trace.traceId, this.spanId);
  }

  /** The first SSE frame arrived from the upstream. */
  firstByte(): void {
    this.ttftMs ??= this.trace.elapsed() - this.start;
  }

  /** The try settled: with a status (an HTTP answer) and, when it failed, why. */
  settle(status: number | undefined, failure?: { errorClass: ErrorClass; message: string }): void {
    this.end = this.trace.elapsed();
    this.status = status;
    if (failure) {
      this.errorClass = failure.errorClass;
      this.errorMessage = failure.message;
    }
  }

  /** A winning stream's span lasts until the stream's end (a failed attempt keeps its own end). */
  extend(): void {
    if (this.status !== undefined && this.status >= 200 && this.status < 300) this.end = this.trace.elapsed();
  }
}

/** What the request path learned, read when the spans are built. */
export interface RequestOutcome {
  status: number;
  /** `gen_ai.operation.name` (OpenTelemetry GenAI: `chat`, `text_completion`, `embeddings`). */
  operation: string;
  requestModel?: string;
  responseModel?: string;
  responseId?: string;
  finishReason?: string;
  inputTokens?: number;
  outputTokens?: number;
  apiKeyId?: string;
  /** Who a JWT caller's token named (`aisix.jwt_*`, docs/identity.md "Usage attribution"). */
  jwt?: { subject: string; provider: string; claimMapping?: string };
  modelId?: string;
  clientIp?: string;
  userAgent?: string;
  /** The failure's kind (`error.type`) when the request failed. */
  errorType?: string;
  /** Arrival → first byte sent to the caller. */
  downstreamTtftMs?: number;
  /** The serving attempt's time to its first chunk as the request's log line states it (a stream's). */
  upstreamTtftMs?: number;
  /** Whether the request was refused by a rate limit (`aisix.error_class` `rate_limit_exceeded`). */
  rateLimited?: boolean;
  /** Captured content (content_mode `full`), already free of credentials. */
  prompt?: string;
  completion?: string;
  /** The response cache's part when a policy applied (a hit is answered without an upstream attempt). */
  cache?: CacheOutcome;
  /** A tool or agent call's span name (`execute_tool <tool>`, `invoke_agent <agent>`); absent: `chat.completions`. */
  spanName?: string;
  /** Its surface's attributes (`gen_ai.tool.name`, `aisix.mcp.server_name`, …), on the carrier span. */
  callAttributes?: Readonly<Record<string, string | number>>;
  /** Its one upstream request (ms since arrival), when it reached one: a CLIENT span under SERVER. */
  upstreamCall?: { start: number; end: number };
}

/** The response cache's decision for a request, in AISIX's usage-event terms (docs/cache.md). */
export interface CacheOutcome {
  status: 'hit' | 'miss' | 'bypass';
  layer?: 'exact' | 'semantic';
  similarity?: number;
  /** The stored answer's usage, which a hit did not spend again. */
  saved?: { input: number; output: number };
}

export class RequestTrace {
  readonly traceId: string;
  readonly serverSpanId = randomHexId(8);
  readonly logicalSpanId = randomHexId(8);
  /** Wall clock at arrival, ms since the epoch. */
  readonly startWall: number;
  private readonly startMono: number;
  readonly attempts: AttemptSpan[] = [];
  /** Set when the last byte is out. */
  end: number | undefined = undefined;
  /** The caller's `user-agent` (`aisix.client_user_agent`). */
  userAgent: string | undefined = undefined;
  /** Why the model stopped, as the answer the caller got said (`gen_ai.response.finish_reasons`). */
  finishReason: string | undefined = undefined;
  /** Captured content (`content_mode: full`), free of credentials; set by the request path. */
  prompt: string | undefined = undefined;
  completion: string | undefined = undefined;

  constructor(
    readonly requestId: string,
    readonly remote: RemoteContext | undefined,
    /** The exporters (by name) that keep this request. */
    readonly exporters: readonly string[],
    private readonly clock: TraceClock = systemTraceClock,
  ) {
    this.traceId = remote?.traceId ?? randomHexId(16);
    this.startWall = clock.wall();
    this.startMono = clock.mono();
  }

  /** Milliseconds since arrival. */
  elapsed(): number {
    return this.clock.mono() - this.startMono;
  }

  /** An upstream try begins now. */
  attempt(
    kind: AttemptKind,
    target: { id?: string; model: string; provider: string; url?: string },
  ): AttemptSpan {
    let host: string | undefined;
    let port: number | undefined;
    if (target.url) {
      try {
        const u = new URL(target.url);
        host = u.hostname;
        port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
      } catch {
        // Not a URL (the echo adapter): no server attributes.
      }
    }
    const a = new AttemptSpan(
      this,
      this.attempts.length,
      kind,
      target.id ?? '',
      target.model,
      target.provider,
      host,
      port,
      this.elapsed(),
    );
    this.attempts.push(a);
    return a;
  }

  /** The attempt whose answer the caller got (the last one that settled with a status, else the last one). */
  get serving(): AttemptSpan | undefined {
    return this.attempts[this.attempts.length - 1];
  }

  finish(): void {
    this.end ??= this.elapsed();
  }
}
