// The values dispatch hands around (docs/routing.md): what the caller's side gives it, what it answers, and
// the routing-internal shapes its parts (plan, attempt, attempt recording, stream commit) share.
import type { DeploymentLabels } from '../observability/gateway-metrics.ts';
import type {
  CallerHeaders,
  Endpoint,
  ProviderAdapter,
  ProviderCall,
  StreamEnd,
  TokenCounts,
} from '../providers/types.ts';
import type { DirectModel, Model, ProviderKey, Routing } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { CancelSignal } from '../util/cancel.ts';
import type { RunResult } from './retry.ts';
import type { Candidate, HeaderReader } from './strategies.ts';

export interface DispatchInput {
  snapshot: Snapshot;
  model: Model;
  /** For a direct model reached through a wildcard alias, the upstream model name. */
  upstreamModel?: string;
  endpoint: Endpoint;
  /** The caller's wire (the proxy's route table), for the `inbound_protocol` label; default `openai`. */
  wire?: 'openai' | 'anthropic';
  body: Record<string, unknown>;
  /** A multipart endpoint's form; `body` holds its text fields (ProviderCall `form`). */
  form?: ProviderCall['form'];
  stream: boolean;
  /**
   * The stream is raw bytes (audio, a transcription), not SSE: no early commit, since nothing can be said to
   * the caller in band once the 200 is out; a failure before the upstream's head is the caller's error answer.
   */
  relay?: boolean;
  /** Aborted when the caller goes away. */
  signal: CancelSignal;
  /** consistent_hash `hash_on` sources: the request headers, the caller's API key id and the client's IP
   *  (the connection's peer, or the address `proxy.real_ip` resolved). */
  headers?: HeaderReader & Pick<CallerHeaders, 'forEach'>;
  apiKeyId?: string;
  /** The caller's key, for the provider key's `request.default_headers` templates. */
  apiKey?: ProviderCall['apiKey'];
  clientIp?: string;
  /** What watches the request's attempts (traces), when anything does; dispatch only tells it. */
  attempts?: AttemptWatch;
  /**
   * A routing model's targets: reserve the target's own limits before each attempt on it (docs/routing.md
   * "Members' own limits"). Absent: nothing to reserve.
   */
  reserveTarget?: (target: DirectModel) => Promise<TargetReservation>;
  /** The request's id, sent upstream on every attempt (`x-aisix-request-id`). */
  requestId?: string;
  /** Told of each finished attempt, refused targets included (the usage events, src/usage). */
  onAttempt?: (a: AttemptFact) => void;
}

/** One finished attempt as the usage events record it (src/routing/attempt-fact.ts builds it). */
export interface AttemptFact {
  model: DirectModel;
  key: ProviderKey;
  upstreamModel: string;
  kind: 'initial' | 'retry' | 'fallback';
  /** The status of this attempt: the upstream's, 504 for a timeout, 502 for a transport failure, 429 for a
   *  target its own limits refused, 401 for a credential that could not be sent. */
  status: number;
  /** Why it failed (AISIX's `error_class`), and in words; undefined for a success. */
  errorClass?: string;
  errorMessage?: string;
  /** Nothing reached the upstream (a refused target, an unusable credential, a body that could not be made). */
  noUpstreamRequest: boolean;
  /** When it started (the gateway's clock, ms) and how long it took to settle (a stream: its head). */
  startedAt: number;
  durationMs: number;
  /** A stream that started: its figures are the stream's, known at its end. */
  live: boolean;
}

/**
 * What watches one request's upstream attempts (traces: src/telemetry/attempts.ts): told as each attempt begins,
 * when its first chunk comes and how it settled. Dispatch tells it and asks nothing of it but the header an
 * attempt carries.
 */
export interface AttemptWatch {
  /** An attempt on `t` begins now. */
  attempt(input: DispatchInput, t: Target): WatchedAttempt;
  /** The served stream's first chunk came after the stream was committed to the caller. */
  firstChunk(): void;
}

/** One attempt as its watcher sees it. */
export interface WatchedAttempt {
  /** The `traceparent` the upstream request carries; undefined: none. */
  readonly traceparent: string | undefined;
  /** The upstream's first chunk arrived. */
  firstByte(): void;
  /** The attempt settled (never called for a target refused by its own limits: that one was never attempted). */
  settled(o: AttemptOutcome): void;
}

/**
 * Why a request could not be answered by an upstream, in routing's own terms; the HTTP layer (src/http)
 * turns it into the caller's envelope. `message` is for the caller (the gateway's words, or an upstream's
 * message the HTTP layer scrubs); `detail` only for the log (a transport's words, e.g. a runtime's advice).
 */
export interface DispatchFailure {
  kind:
    | 'upstream_error'
    | 'upstream_timeout'
    | 'all_candidates_unavailable'
    | 'invalid_request'
    | 'service_unavailable'
    | 'rate_limit_exceeded'
    /** the target's key names no adapter (AISIX's `provider_unavailable`) */
    | 'provider_unavailable'
    /** an output guardrail refused the answer (src/proxy/guardrails.ts) */
    | 'content_filter';
  status: number;
  message: string;
  detail?: string;
  retryAfterSecs?: number;
}

export type DispatchResult =
  /**
   * A whole upstream answer: 2xx (a JSON object: a 2xx that is not one is a failure), or a 4xx the caller
   * gets back (its body re-wrapped by the HTTP layer; its Retry-After kept).
   */
  | {
    kind: 'response';
    status: number;
    body: string;
    contentType: string;
    headers: Record<string, string>;
    target: DirectModel;
    served?: ServedBy;
    /** The adapter's count when the body cannot state all of it (ProviderResult `counted`). */
    counted?: TokenCounts;
  }
  /**
   * A live SSE body. The caller must run it through the pump and call `settle` exactly once with how it
   * ended (health, metrics and in-flight counts are recorded then); `abort` stops the upstream.
   */
  | {
    kind: 'stream';
    chunks: AsyncIterable<Uint8Array>;
    abort(): void;
    settle(end: StreamEnd): void;
    served?: ServedBy;
    /** The serving attempt's time from its start to its first SSE frame (ms), once there is one. */
    ttftMs?(): number | undefined;
    /** The adapter's own count of the stream's tokens once it ended (ProviderResult `counted`); when
     *  defined it wins over the usage read in the bytes (an adapter may withhold the usage chunk). */
    counted?(): TokenCounts | undefined;
    /** Headers for the caller's answer from the target known to serve it (ProviderResult `headers`). */
    headers?: Record<string, string>;
    /** The serving target's headers once one answered: a stream committed before that has no `headers`. */
    servedHeaders?(): Record<string, string> | undefined;
  }
  | { kind: 'error'; failure: DispatchFailure; target?: DirectModel; served?: ServedBy }
  /** The caller went away before an answer existed. */
  | { kind: 'aborted' };

/**
 * Which upstream target served a request (or failed it last), for the request metrics and the access log
 * (docs/aisix-compatibility.md "Metrics"). For a stream it describes the target whose first chunk started
 * the answer.
 */
export interface ServedBy {
  /** The direct model (routing target) of the deciding attempt. */
  model: DirectModel;
  key: ProviderKey;
  /** The model name sent upstream. */
  upstreamModel: string;
  /** Upstream attempts made for this request (`routing_attempt_count`). */
  attempts: number;
  /** Attempts that moved to a different target than the previous attempt (`routing_fallback_count`). */
  fallbacks: number;
  /** Whether the deciding attempt was on another target than the first one tried (`is_fallback`). */
  isFallback: boolean;
  /** The deciding attempt's kind: the first try, a try on the same target, or one on another target. */
  kind: 'initial' | 'retry' | 'fallback';
  /** When the deciding attempt started (`Date.now()`) and how long it took to settle (ms; a stream: its head). */
  startedAt: number;
  durationMs: number;
}

// ---- shared by the parts of dispatch ------------------------------------------------------------------

/** Deadlines of one target (AISIX `effective_timeouts`); 0 = none. */
export interface TimeoutBudget {
  /** Non-stream deadline, ms. */
  timeoutMs: number;
  /** Stream deadline: the head (and, when `streamConfigured`, the first chunk), then the longest silence
   *  between chunks, ms. */
  silenceMs: number;
  /** `silenceMs` came from the resources (target or group), not the deployment default: withhold the 200
   *  until the first chunk, so a slow first token fails over. */
  streamConfigured: boolean;
}

/** One routing target, ready to call. Also a strategies `Candidate`. */
export interface Target extends Candidate, TimeoutBudget {
  model: DirectModel;
  upstreamModel: string;
  key: ProviderKey;
  adapter: ProviderAdapter;
  labels: DeploymentLabels;
}

/** A stream whose upstream answered 2xx: the attempt succeeded; the rest is read by the caller's pump. */
export interface LiveStream {
  /** The first chunk, when the attempt waited for it (a resource-configured stream budget). */
  first?: Uint8Array;
  rest: AsyncIterator<Uint8Array>;
  /** Abort the upstream request. */
  abort(): void;
  /** Release what the attempt holds (deadline timer, caller-gone listener, in-flight count). Idempotent. */
  end(): void;
  /** When the attempt began, and when its first chunk arrived (ms, the gateway's clock): the upstream TTFT. */
  startedAt: number;
  firstAt?: number;
  /** The adapter's count, once the stream ended (ProviderResult `counted`). */
  counted?: () => TokenCounts | undefined;
  /** Headers the adapter adds to the caller's answer (ProviderResult `headers`). */
  headers?: Record<string, string>;
}

/** What one attempt produced: runAttempts' `Outcome`, plus the answer itself. */
export type AttemptOutcome =
  | {
    kind: 'response';
    status: number;
    retryAfter: string | null;
    body: string;
    contentType: string;
    /** The gateway refused the call before any upstream one (a 400 with this message). */
    refusal?: string;
    /** With `refusal`: the key has no adapter; the caller gets 503 `provider_unavailable`, not the 400. */
    unavailable?: true;
    /** With `refusal`: the log's words besides (a runtime's, which the caller is not told). */
    refusalDetail?: string;
    /** Headers the gateway adds to the answer (ProviderResult `headers`). */
    headers?: Record<string, string>;
    /** The adapter's count of a 2xx answer (ProviderResult `counted`). */
    counted?: TokenCounts;
    live?: undefined;
  }
  | { kind: 'response'; status: number; retryAfter: null; live: LiveStream }
  /** The target's deadline (`afterMs`) expired first. */
  | { kind: 'timeout'; afterMs: number }
  /** No usable answer: a transport failure (`message` is the transport's words, for the log), or a 2xx whose
   *  body is not the JSON the endpoint promises (`callerMessage`: our words for the caller; `retryable: false`:
   *  fail over, do not retry — e.g. an answer over upstream.max_response_bytes). `failure`: what the caller is
   *  told of an answer the transport refused (`RefusedAnswer`); `notUpstream`: the gateway's own limit refused
   *  it, so the target's health is not charged. */
  | {
    kind: 'transport';
    message: string;
    callerMessage?: string;
    retryable?: false;
    failure?: DispatchFailure;
    notUpstream?: true;
  }
  /** The target's own rate limits refused it (`message` for the caller); nothing was sent. */
  | { kind: 'over_limit'; retryAfterSecs: number; message: string; byPolicy: boolean };

/**
 * A routing target's own rate limits for one attempt: reserved, or refused with the caller's words
 * (`byPolicy`: a rate-limit policy refused, not the target's inline `rate_limit`).
 */
export type TargetReservation = { ok: true } | {
  ok: false;
  retryAfterSecs: number;
  message: string;
  byPolicy: boolean;
};

export type Run = RunResult<Target, AttemptOutcome>;

/** The targets of one request in the order they are tried. */
export interface Plan {
  order: [Target, ...Target[]];
  /** The routing block of a routing model; undefined for a direct model requested by name. */
  routing?: Routing;
}

/** The caller's answer from the loop's result; a stream that started comes back as `live`. */
export type Answer =
  | Exclude<DispatchResult, { kind: 'stream' }>
  | { kind: 'live'; target: Target; live: LiveStream; served: ServedBy };

/** The caller's words for an upstream that gave no answer; the transport's own go to the log (`detail`). */
export const TRANSPORT_FAILED = 'upstream request failed: no answer from the upstream';

/** The caller's words for an upstream whose certificate was refused (`problem` is OpenSSL's phrase). */
export function certificateFailed(problem: string): string {
  return `upstream request failed: certificate verify failed: ${problem}`;
}

export function upstreamFailure(message: string): DispatchFailure {
  return { kind: 'upstream_error', status: 502, message };
}

export function allUnavailable(model: string): DispatchFailure {
  return {
    kind: 'all_candidates_unavailable',
    status: 503,
    message: `every routing candidate of model "${model}" is unavailable`,
    retryAfterSecs: 30,
  };
}

export function closeLive(live: LiveStream): void {
  live.abort();
  live.end();
}
