// What a guardrail is once built, and what it answers (docs/guardrails.md "Verdicts"). Built once per row
// value; the chain (chain.ts) turns outcomes into verdicts, metrics and log lines.

/** The side of a request a guardrail checks. */
export type Hook = 'input' | 'output';

/** One piece of text of a request or an answer, in order; masks are written back per segment. */
export interface Segment {
  text: string;
  role: 'system' | 'user' | 'assistant' | 'tool';
}

/**
 * What one guardrail says about the segments. `unavailable`: a remote service could not answer (`tag` is
 * AISIX's failure tag, e.g. `lakera_timeout`); the chain applies `fail_open` / `output_fail_open` /
 * `mandatory`. `reason` goes to logs only, never on the wire.
 */
export type Outcome =
  | { kind: 'allow' }
  | { kind: 'block'; reason: string }
  | { kind: 'mask'; texts: string[]; counts: Record<string, number> }
  | { kind: 'unavailable'; tag: string; reason: string; fields?: Record<string, unknown> };

export const ALLOW: Outcome = { kind: 'allow' };

/** How a streamed answer is held back for this guardrail's output check (docs/guardrails.md "Streams"). */
export type StreamPolicy =
  | { kind: 'end' }
  | { kind: 'window'; size: number; overlap: number }
  | { kind: 'buffer'; maxBytes: number; failOpen: boolean };

/** One call to a guardrail service; the gateway's upstream client is one (src/platform.ts `UpstreamFetch`). */
export type GuardFetch = (req: {
  url: string;
  method: 'POST';
  headers: Record<string, string>;
  body: string;
  signal?: AbortSignal;
}) => Promise<
  {
    status: number;
    text(): Promise<string>;
    /** The platform's upstream client answers `header`; a plain `fetch` Response, `headers`. */
    header?(name: string): string | null;
    headers?: { get(name: string): string | null };
  }
>;

/** What a check may use: the upstream HTTP client (remote kinds) and the caller's hang-up. */
export interface CheckContext {
  fetch: GuardFetch;
  signal?: AbortSignal;
  /** `bedrock_endpoint_url` (config.yaml): where `kind: bedrock` calls ApplyGuardrail instead of AWS. */
  bedrockEndpointUrl?: string | undefined;
  /**
   * A service's words made fit to log: every configured secret redacted, then cut to `maxChars`
   * (src/http/scrub.ts); absent, only the cut.
   */
  scrub?: (text: string, maxChars: number) => string;
  /**
   * The upstream answer's id, on the output hook where the answer has one (Aliyun's `sessionId`/`chatId`
   * join a response's windows in its console).
   */
  responseId?: string | undefined;
  /**
   * `false` where a mask cannot be written back (a streamed window already on its way): a kind whose service
   * asks to mask then refuses instead. Absent: masks are written back.
   */
  writeBack?: boolean;
  /** Lines a check writes itself (a remote service's 4xx); `guardrail` and `id` fields are added by the chain. */
  log?: (level: 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown>) => void;
  /** A span a semantic row could not have its model judge, by AISIX's degrade reason (the chain counts it). */
  degraded?: (reason: SemanticDegradeReason) => void;
}

/** AISIX's reasons a semantic span goes without its model judgement (`aisix_guardrail_semantic_degraded_total`). */
export type SemanticDegradeReason =
  | 'engine_failed'
  | 'prototype_unavailable'
  | 'budget_exhausted'
  | 'queue_timeout'
  | 'inference_failed';

export interface Guardrail {
  /** The row id (etcd key id, or the file's derived id). */
  readonly id: string;
  readonly name: string;
  readonly kind: string;
  readonly input: boolean;
  readonly output: boolean;
  /** `enforcement_mode: monitor`: outcomes recorded as `would_block` / `would_mask`, nothing changed. */
  readonly monitor: boolean;
  /** Remote kinds: the failure policy per hook (`fail_open`, `output_fail_open`); local kinds never fail. */
  readonly failOpen: boolean;
  readonly outputFailOpen: boolean;
  readonly mandatory: boolean;
  readonly createdAt: string | undefined;
  readonly stream: StreamPolicy;
  /** The row's credentials (remote kinds), for the scrubber: a service's answer that echoes one is logged without it. */
  readonly secrets?: readonly string[];
  check(segments: readonly Segment[], hook: Hook, ctx: CheckContext): Outcome | Promise<Outcome>;
}

/** The default output hold-back of a kind that names none: the whole answer, 256 KiB, fail-closed. */
export const DEFAULT_STREAM: StreamPolicy = { kind: 'buffer', maxBytes: 262_144, failOpen: false };

/** AISIX joins the scanned parts with `\n`, empty ones left out. */
export function joined(segments: readonly Segment[]): string {
  let out = '';
  for (const s of segments) {
    if (s.text === '') continue;
    out = out === '' ? s.text : `${out}\n${s.text}`;
  }
  return out;
}
