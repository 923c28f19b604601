// One JSON call to a guardrail service, with AISIX's failure tags (docs/guardrails.md "Remote kinds"):
// `<k>_timeout`, `<k>_throttled` (429), `<k>_5xx` (5xx, transport, or a 2xx that is not JSON),
// `<k>_config_error` (any other 4xx, logged at ERROR with the first 2048 characters of the body, scrubbed of
// every configured secret before it is cut).
import { SERVICE_MSG } from '../messages.ts';
import type { CheckContext } from '../types.ts';

export type CallResult =
  | { ok: true; body: unknown }
  | { ok: false; tag: string; reason: string };

export interface CallSpec {
  /** The tag prefix: `openai_moderation`, `presidio`, `lakera`, `azure_cs`. */
  service: string;
  url: string;
  headers: Record<string, string>;
  /** JSON, or a form already encoded (`application/x-www-form-urlencoded`). */
  body: unknown;
  form?: boolean;
  /** Log a 4xx answer's body (off where the service quotes the request, the prompt, back). */
  logBody?: boolean;
  /** Bounds the whole call, headers and body; 0 times out at once. */
  timeoutMs: number;
}

const MAX_LOGGED_BODY = 2048;

export async function callJson(ctx: CheckContext, spec: CallSpec): Promise<CallResult> {
  const ac = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort();
  }, spec.timeoutMs);
  const onCallerGone = () => ac.abort();
  ctx.signal?.addEventListener('abort', onCallerGone, { once: true });
  const fail = (kind: string, reason: string): CallResult => ({ ok: false, tag: `${spec.service}_${kind}`, reason });
  try {
    if (spec.timeoutMs === 0) throw new Error('timeout_ms is 0');
    const res = await ctx.fetch({
      url: spec.url,
      method: 'POST',
      headers: {
        'content-type': spec.form ? 'application/x-www-form-urlencoded' : 'application/json',
        ...spec.headers,
      },
      body: spec.form ? String(spec.body) : JSON.stringify(spec.body),
      signal: ac.signal,
    });
    const text = await res.text();
    if (res.status === 429) return fail('throttled', `HTTP 429`);
    if (res.status >= 500) return fail('5xx', `HTTP ${res.status}`);
    if (res.status >= 400) {
      ctx.log?.('error', SERVICE_MSG[spec.service]?.configError ?? `${spec.service} returned 4xx`, {
        http_status: res.status,
        ...(spec.logBody === false ? {} : { response_body: loggable(ctx, text, MAX_LOGGED_BODY) }),
      });
      return fail('config_error', `HTTP ${res.status}`);
    }
    try {
      return { ok: true, body: JSON.parse(text) };
    } catch {
      return fail('5xx', `HTTP ${res.status} with a body that is not JSON`);
    }
  } catch (e) {
    if (timedOut || spec.timeoutMs === 0) return fail('timeout', `no answer within ${spec.timeoutMs} ms`);
    return fail('5xx', `transport: ${(e as Error).message}`);
  } finally {
    clearTimeout(timer);
    ctx.signal?.removeEventListener('abort', onCallerGone);
  }
}

/** A service's answer as it may be logged: scrubbed of every configured secret first, then cut. */
export function loggable(ctx: CheckContext, text: string, maxChars: number): string {
  return ctx.scrub ? ctx.scrub(text, maxChars) : text.slice(0, maxChars);
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A 2xx whose JSON is not the shape the service promises counts as the service failing. */
export function malformed(service: string, what: string): { kind: 'unavailable'; tag: string; reason: string } {
  return { kind: 'unavailable', tag: `${service}_5xx`, reason: `malformed answer: ${what}` };
}

/** `base` without trailing slashes, then `path`. */
export function join(base: string, path: string): string {
  return base.replace(/\/+$/, '') + path;
}
