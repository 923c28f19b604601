// `kind: aliyun_text_moderation` (docs/guardrails.md "Remote kinds"): Aliyun's TextModerationPlus, an RPC call
// signed with signature v1 (HMAC-SHA1 over the sorted, RFC 3986-encoded form). The input hook asks
// `llm_query_moderation`, the output hook `llm_response_moderation`; at most 2000 characters a call; a
// returned `Data.RiskLevel` at or over `risk_level_threshold` blocks.
import type { AliyunTextModerationRow } from '../schema.ts';
import { ALLOW, type CheckContext, type Hook, joined, type Outcome, type Segment } from '../types.ts';
import { callJson, isRecord, malformed } from './http.ts';

const SERVICE = 'aliyun';
const MAX_CONTENT = 2000;
const RANK: Record<string, number> = { none: 0, low: 1, medium: 2, high: 3 };

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

export function buildAliyunTextModeration(
  row: AliyunTextModerationRow,
): (s: readonly Segment[], hook: Hook, ctx: CheckContext) => Promise<Outcome> {
  const url = `${(row.endpoint ?? `https://green-cip.${row.region}.aliyuncs.com`).replace(/\/+$/, '')}/`;
  const threshold = RANK[row.risk_level_threshold]!;
  return async (segments, hook, ctx) => {
    const content = [...joined(segments)].slice(0, MAX_CONTENT).join('');
    if (content.trim() === '') return ALLOW;
    const params: Record<string, string> = {
      AccessKeyId: row.access_key_id,
      Action: 'TextModerationPlus',
      Format: 'JSON',
      RegionId: row.region,
      Service: hook === 'input' ? 'llm_query_moderation' : 'llm_response_moderation',
      ServiceParameters: JSON.stringify({ content }),
      SignatureMethod: 'HMAC-SHA1',
      SignatureNonce: crypto.randomUUID(),
      SignatureVersion: '1.0',
      Timestamp: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
      Version: '2022-03-02',
    };
    const signature = await signV1(params, row.access_key_secret);
    const form = Object.keys(params).sort().map((k) => `${k}=${percentEncode(params[k]!)}`).join('&') +
      `&Signature=${percentEncode(signature)}`;
    const r = await callJson(ctx, {
      service: SERVICE,
      url,
      headers: { accept: 'application/json' },
      body: form,
      form: true,
      logBody: false,
      timeoutMs: row.timeout_ms,
    });
    if (!r.ok) return { kind: 'unavailable', tag: r.tag, reason: r.reason };
    if (!isRecord(r.body) || typeof r.body.Code !== 'number') return malformed(SERVICE, 'no numeric `Code`');
    const code = r.body.Code;
    if (code === 400 || code === 401 || code === 403 || code === 408) {
      return { kind: 'unavailable', tag: `${SERVICE}_config_error`, reason: `Code ${code}` };
    }
    if (code !== 200) return { kind: 'unavailable', tag: `${SERVICE}_5xx`, reason: `Code ${code}` };
    const data = isRecord(r.body.Data) ? r.body.Data : {};
    const level = typeof data.RiskLevel === 'string' && data.RiskLevel !== '' ? data.RiskLevel.toLowerCase() : 'none';
    if ((RANK[level] ?? 0) < threshold) return ALLOW;
    return { kind: 'block', reason: `aliyun text moderation: risk level ${level} >= threshold` };
  };
}
