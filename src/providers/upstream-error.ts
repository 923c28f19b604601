// Reading an upstream's error answer, whichever wire it speaks: OpenAI's `{"error":{message,type,param,code}}`,
// Anthropic's `{"type":"error","error":{type,message}}`, a bare `{"error":"…"}`, or plain text. Only what
// the caller may be told is kept (the HTTP layer re-wraps it in the caller's envelope, scrubs secrets, then
// cuts it to `MAX_UPSTREAM_MESSAGE`: never cut before the scrub, or a cut through a secret leaves its start).

export interface UpstreamErrorParts {
  message: string;
  /** The upstream's `error.type`, when it named one. */
  type?: string;
  /** OpenAI's `param` and `code`, present (null included) only when the upstream sent them. */
  param?: string | null;
  code?: string | number | null;
}

/** The longest upstream message passed on, in characters, once scrubbed; the rest is cut. */
export const MAX_UPSTREAM_MESSAGE = 500;

export function upstreamErrorParts(body: string): UpstreamErrorParts {
  let err: Record<string, unknown> | undefined;
  try {
    const v: unknown = JSON.parse(body);
    const e = typeof v === 'object' && v !== null ? (v as { error?: unknown }).error : undefined;
    if (typeof e === 'object' && e !== null && !Array.isArray(e)) err = e as Record<string, unknown>;
    else if (typeof e === 'string') err = { message: e };
  } catch {
    // not JSON: the text itself is the message
  }
  const raw = typeof err?.message === 'string' ? err.message : body.trim();
  const message = raw || 'upstream error';
  const parts: UpstreamErrorParts = { message };
  if (typeof err?.type === 'string') parts.type = err.type;
  if (err && 'param' in err && (err.param === null || typeof err.param === 'string')) parts.param = err.param;
  const code = err?.code;
  if (err && 'code' in err && (code === null || typeof code === 'string' || typeof code === 'number')) {
    parts.code = code;
  }
  return parts;
}
