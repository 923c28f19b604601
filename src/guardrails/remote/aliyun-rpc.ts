// What Aliyun's two guardrail kinds share (docs/guardrails.md "Aliyun"): the RPC form signed with signature
// v1 (HMAC-SHA1 over the sorted, RFC 3986-encoded form), the 2000-character pieces a call takes, the request
// id an operator joins Aliyun's console records on (`x-acs-request-id`, else the body's `RequestId`), and the
// failure tags: `aliyun_timeout`, `aliyun_throttled`, `aliyun_5xx`, `aliyun_bad_response`, `aliyun_config_error`.
import type { CheckContext, Outcome } from '../types.ts';
import { isRecord } from './http.ts';

/** Aliyun checks at most this many characters a call; longer text goes in pieces, every piece checked. */
export const MAX_CONTENT = 2000;

/** RFC 3986 percent-encoding: everything but `A-Za-z0-9-_.~`. */
export function percentEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** The v1 signature of sorted `params`: base64 HMAC-SHA1 of `<method>&%2F&<encoded query>`, key `<secret>&`. */
export async function signV1(params: Record<string, string>, secret: string, method = 'POST'): Promise<string> {
  const query = Object.keys(params).sort().map((k) => `${percentEncode(k)}=${percentEncode(params[k]!)}`).join('&');
  const toSign = `${method}&${percentEncode('/')}&${percentEncode(query)}`;
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey('raw', enc.encode(`${secret}&`), { name: 'HMAC', hash: 'SHA-1' }, false, [
    'sign',
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, enc.encode(toSign)));
  let bin = '';
  for (const b of mac) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** `text` in pieces of at most `max` code points (a surrogate pair is never split). */
export function pieces(text: string, max = MAX_CONTENT): string[] {
  const cps = [...text];
  const out: string[] = [];
  for (let i = 0; i < cps.length; i += max) out.push(cps.slice(i, i + max).join(''));
  return out;
}

export interface AliyunRow {
  region: string;
  access_key_id: string;
  access_key_secret: string;
  endpoint?: string | undefined;
  timeout_ms: number;
}

export interface RpcCall {
  action: 'TextModerationPlus' | 'MultiModalGuard';
  service: string;
  serviceParameters: Record<string, string>;
  /** ERROR line of a 4xx answer or a configuration `Code` (its words name what to check). */
  configError: string;
  /** ERROR line of `Code` 408 (the service is not activated), where the kind has one. */
  notActivated?: string;
}

export type RpcResult =
  | { ok: true; data: Record<string, unknown>; requestId: string; code: number }
  | { ok: false; outcome: Extract<Outcome, { kind: 'unavailable' }> };

export function endpointOf(row: AliyunRow): string {
  return `${(row.endpoint ?? `https://green-cip.${row.region}.aliyuncs.com`).replace(/\/+$/, '')}/`;
}

/**
 * One signed call. Aliyun's error answers quote the request (the prompt) back, so no body is ever logged:
 * only its `Code` and the request id.
 */
export async function callAliyun(row: AliyunRow, call: RpcCall, ctx: CheckContext): Promise<RpcResult> {
  const form = await signedForm(row, call);
  const ac = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort();
  }, row.timeout_ms);
  const onCallerGone = () => ac.abort();
  ctx.signal?.addEventListener('abort', onCallerGone, { once: true });
  let requestId = '';
  try {
    if (row.timeout_ms === 0) throw new Error('timeout_ms is 0');
    const res = await ctx.fetch({
      url: endpointOf(row),
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: form,
      signal: ac.signal,
    });
    requestId = res.header?.('x-acs-request-id') ?? res.headers?.get('x-acs-request-id') ?? '';
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (requestId === '' && isRecord(body) && typeof body.RequestId === 'string') requestId = body.RequestId;
    return readReply(res.status, body, requestId, call, ctx);
  } catch (e) {
    if (timedOut || row.timeout_ms === 0) return failed(requestId, 'timeout', `no answer within ${row.timeout_ms} ms`);
    return failed(requestId, '5xx', `transport: ${(e as Error).message}`);
  } finally {
    clearTimeout(timer);
    ctx.signal?.removeEventListener('abort', onCallerGone);
  }
}

/** The call's form body, signed with the row's secret (Aliyun's RPC signature, version 1.0). */
async function signedForm(row: AliyunRow, call: RpcCall): Promise<string> {
  const params: Record<string, string> = {
    AccessKeyId: row.access_key_id,
    Action: call.action,
    Format: 'JSON',
    RegionId: row.region,
    Service: call.service,
    ServiceParameters: JSON.stringify(call.serviceParameters),
    SignatureMethod: 'HMAC-SHA1',
    SignatureNonce: crypto.randomUUID(),
    SignatureVersion: '1.0',
    Timestamp: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    Version: '2022-03-02',
  };
  const signature = await signV1(params, row.access_key_secret);
  return Object.keys(params).sort().map((k) => `${k}=${percentEncode(params[k]!)}`).join('&') +
    `&Signature=${percentEncode(signature)}`;
}

/** The service unavailable, tagged by `kind` (`aisix_guardrail_bypasses_total`, the service logs). */
function failed(requestId: string, kind: string, reason: string): RpcResult {
  return {
    ok: false,
    outcome: { kind: 'unavailable', tag: `aliyun_${kind}`, reason, fields: { aliyun_request_id: requestId } },
  };
}

/** An answer's status and `Code` as a reply or the failure they name; a configuration error is logged. */
function readReply(status: number, body: unknown, requestId: string, call: RpcCall, ctx: CheckContext): RpcResult {
  const code = isRecord(body) ? body.Code : undefined;
  if (status === 429) return failed(requestId, 'throttled', 'HTTP 429');
  if (status >= 500) return failed(requestId, '5xx', `HTTP ${status}`);
  if (status < 200 || status >= 300) {
    ctx.log?.('error', call.configError, {
      aliyun_request_id: requestId,
      http_status: status,
      aliyun_code: typeof code === 'string' || typeof code === 'number' ? code : '',
    });
    return failed(requestId, 'config_error', `HTTP ${status}`);
  }
  if (!isRecord(body) || typeof code !== 'number') {
    return failed(requestId, 'bad_response', 'a 2xx answer without a numeric `Code`');
  }
  if (code === 408 && call.notActivated !== undefined) {
    ctx.log?.('error', call.notActivated, { aliyun_request_id: requestId, aliyun_code: code, service: call.service });
    return failed(requestId, 'config_error', `Code ${code}`);
  }
  if (code === 400 || code === 401 || code === 403 || code === 408) {
    ctx.log?.('error', call.configError, { aliyun_request_id: requestId, http_status: status, aliyun_code: code });
    return failed(requestId, 'config_error', `Code ${code}`);
  }
  if (code !== 200) return failed(requestId, '5xx', `Code ${code}`);
  return { ok: true, data: isRecord(body.Data) ? body.Data : {}, requestId, code };
}
