// The upstream side of the direct-HTTP endpoints in this folder (docs/batch-files-endpoints.md "Upstream"):
// AISIX's URL rule for them (a base with a path is kept, a bare host gets `/v1`), the credential header per
// adapter, the key's operator headers, and one call under the model's deadline.
import type { Config } from '../config/schema.ts';
import { errors, ProxyError } from '../http/errors.ts';
import type { UpstreamFetch, UpstreamResponse } from '../platform.ts';
import { directBase } from '../providers/direct-url.ts';
import { addKeyHeaders } from '../providers/upstream-headers.ts';
import type { ApiKey, DirectModel, ProviderKey } from '../resources/schema.ts';
import { Cancel, type CancelSignal } from '../util/cancel.ts';

/** The key's base for the OpenAI wire (src/providers/direct-url.ts), or the 400 for a key without one. */
export function openAiBase(key: ProviderKey): string | ProxyError {
  return directBase(key.provider, key.api_base) ??
    errors.badRequest(`request payload is invalid: provider_key "${key.display_name}" has no api_base configured`);
}

/** Who calls, for the key's `default_headers` templates and its `forward_client_headers`. */
export interface CallContext {
  readonly key: ProviderKey;
  readonly model: DirectModel;
  readonly apiKey: ApiKey;
  readonly callerHeaders: Headers;
  readonly requestId: string;
}

/** The headers of an upstream call: the credential first, the request id, then the key's own. */
export function upstreamHeaders(
  ctx: CallContext,
  credential: Record<string, string>,
  more: Record<string, string> = {},
): Record<string, string> {
  const headers: Record<string, string> = { ...credential, 'x-aisix-request-id': ctx.requestId, ...more };
  addKeyHeaders(headers, {
    endpoint: 'chat',
    body: {},
    stream: false,
    key: ctx.key,
    callerHeaders: ctx.callerHeaders,
    apiKey: ctx.apiKey,
    model: ctx.model,
    // Only the header templates read this call; nothing is sent through it.
    upstream: () => Promise.reject(new Error('not a call')),
    requestId: ctx.requestId,
    signal: new Cancel(),
  });
  return headers;
}

/** The model's request deadline: its `timeout`, else `upstream.timeout_ms` (0: none). */
export function deadlineMs(model: DirectModel, config: Config): number {
  return model.timeout !== undefined && model.timeout > 0 ? model.timeout : config.upstream.timeout_ms;
}

/** One upstream exchange's failure as the caller's answer: a timeout 504, a transport failure 502. */
export function transportFailure(e: unknown, timedOut: boolean, ms: number): ProxyError {
  if (timedOut) return new ProxyError(504, 'upstream_timeout', `upstream request timed out after ${ms}ms`, 'timeout');
  const cause = e instanceof Error ? e.message : String(e);
  return new ProxyError(502, 'upstream_error', `transport error: ${cause}`, 'transport_error');
}

/**
 * One call under a deadline that also ends with the caller (`callerGone`). `done` releases the timer once the
 * body is read (a relayed body is read under the same deadline only while the caller waits for it).
 */
export async function timedFetch(
  upstream: UpstreamFetch,
  req: Parameters<UpstreamFetch>[0],
  ms: number,
  callerGone: CancelSignal | undefined,
): Promise<{ response: UpstreamResponse; done: () => void } | ProxyError> {
  const cancel = new Cancel();
  let timedOut = false;
  const timer = ms > 0
    ? setTimeout(() => {
      timedOut = true;
      cancel.abort(new Error('deadline'));
    }, ms)
    : undefined;
  const onGone = () => cancel.abort(new Error('client closed'));
  callerGone?.addEventListener('abort', onGone, { once: true });
  const done = () => {
    if (timer !== undefined) clearTimeout(timer);
    callerGone?.removeEventListener('abort', onGone);
  };
  try {
    return { response: await upstream({ ...req, signal: cancel }), done };
  } catch (e) {
    done();
    return transportFailure(e, timedOut, ms);
  }
}
