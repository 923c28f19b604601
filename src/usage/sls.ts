// The `aliyun_sls` exporter kind (docs/usage-events.md "Aliyun SLS"): each usage event as one SLS log (its
// fields under their own names, values as text) and a batch as one PutLogs request — an LZ4-compressed
// `LogGroup`, signed with the AccessKey pair `credential_ref` names in the environment. AISIX's wire.
import type { SlsExporterResource } from '../resources/schema.ts';
import type { CappedContent } from './content.ts';
import { type PostBytes, SCHEMA_VERSION } from './datadog.ts';
import { EVENT_MEMBERS, memberValues, type UsageEvent } from './event.ts';
import type { Deliver } from '../observability/delivery-queue.ts';
import { encodeLogGroup, lz4Block, md5Hex, type SlsLog } from './sls-wire.ts';
import { redactSecrets } from '../util/redact.ts';

const DETAIL_MAX = 200;
const TRANSIENT_CODES = [
  'QuotaExceed',
  'Busy',
  'InternalServerError',
  'Unavailable',
  'RequestTimeExpired',
  'RequestTimeTooSkewed',
];

/** `credential_ref` → the variables of its AccessKey pair: upper-cased, non-alphanumerics as `_`. */
export function slsKeyVariables(ref: string): { id: string; secret: string } {
  const slug = ref.toUpperCase().replace(/[^A-Z0-9]/g, '_');
  return { id: `SLS_CRED_${slug}_AK_ID`, secret: `SLS_CRED_${slug}_AK_SECRET` };
}

/** Where PutLogs goes: `https://<project>.<endpoint>`, or an endpoint with a scheme (a local intake) as it is. */
export function putLogsUrl(row: Pick<SlsExporterResource, 'endpoint' | 'project' | 'logstore'>): string {
  const base = /^https?:\/\//.test(row.endpoint)
    ? row.endpoint.replace(/\/+$/, '')
    : `https://${row.project}.${row.endpoint}`;
  return `${base}${resourceOf(row.logstore)}`;
}

function resourceOf(logstore: string): string {
  return `/logstores/${logstore}/shards/lb`;
}

/**
 * One event's contents: `schema_version`, then every field that serialized under its own name (strings as
 * they are, numbers and booleans as text, arrays and objects as compact JSON; empty strings skipped), then
 * the content when captured. Serialized as a JSON array of pairs: the pipeline queues strings.
 */
export function slsRecord(e: UsageEvent, content?: CappedContent): string {
  const pairs: [string, string][] = [['schema_version', SCHEMA_VERSION]];
  const values = memberValues(e);
  for (let i = 0; i < EVENT_MEMBERS.length; i++) {
    const k = EVENT_MEMBERS[i]!;
    const v = values[i];
    if (v === undefined || v === null || v === '') continue;
    pairs.push([k, typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v)]);
  }
  if (content) {
    pairs.push(['prompt', content.prompt], ['response', content.response]);
    if (content.truncated) pairs.push(['content_truncated', 'true']);
  }
  return JSON.stringify(pairs);
}

/** The headers of a signed PutLogs request for `body` (signature v1, HMAC-SHA1, SLS API 0.6.0). */
export async function signedHeaders(
  logstore: string,
  body: Uint8Array,
  rawSize: number,
  keys: { id: string; secret: string },
  date: string,
): Promise<Record<string, string>> {
  const md5 = md5Hex(body);
  const type = 'application/x-protobuf';
  const logHeaders: Record<string, string> = {
    'x-log-apiversion': '0.6.0',
    'x-log-bodyrawsize': String(rawSize),
    'x-log-compresstype': 'lz4',
    'x-log-signaturemethod': 'hmac-sha1',
  };
  const canonical = Object.keys(logHeaders).sort().map((k) => `${k}:${logHeaders[k]}`).join('\n');
  const toSign = `POST\n${md5}\n${type}\n${date}\n${canonical}\n${resourceOf(logstore)}`;
  return {
    'content-type': type,
    'content-md5': md5,
    date,
    ...logHeaders,
    authorization: `LOG ${keys.id}:${await hmacSha1(keys.secret, toSign)}`,
  };
}

async function hmacSha1(secret: string, text: string): Promise<string> {
  const enc = new TextEncoder();
  // WebCrypto refuses an empty key; HMAC pads a key with zero bytes, so one zero byte signs as the empty one.
  const raw = secret === '' ? new Uint8Array(1) : enc.encode(secret);
  const key = await crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-1' }, false, [
    'sign',
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, enc.encode(text)));
  let bin = '';
  for (const b of mac) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** How one SLS exporter delivers a batch of records. */
export function slsDelivery(
  row: Pick<SlsExporterResource, 'endpoint' | 'project' | 'logstore' | 'credential_ref'>,
  env: Record<string, string | undefined>,
  post: PostBytes,
  now: () => Date = () => new Date(),
): Deliver<string> {
  const url = putLogsUrl(row);
  const names = slsKeyVariables(row.credential_ref);
  // An unresolvable pair is sent empty: SLS refuses it (401) and the failure is counted, never skipped.
  const keys = { id: env[names.id] ?? '', secret: env[names.secret] ?? '' };
  const secrets = [keys.id, keys.secret].filter((s) => s !== '');
  return async (records, signal) => {
    const at = now();
    const time = Math.floor(at.getTime() / 1000);
    const logs: SlsLog[] = records.map((r) => ({ time, contents: JSON.parse(r) as [string, string][] }));
    const raw = encodeLogGroup(logs);
    const body = lz4Block(raw);
    const headers = await signedHeaders(row.logstore, body, raw.length, keys, at.toUTCString());
    const r = await post(url, headers, body, signal);
    if (r.status >= 200 && r.status < 300) return { ok: true };
    const { code, message } = errorOf(r.text);
    const transient = r.status >= 500 || r.status === 408 || r.status === 429 ||
      TRANSIENT_CODES.some((c) => code.includes(c));
    // Scrubbed whole (every encoding of the pair) before the cut, which then drops a tail that starts one.
    const detail = redactSecrets(`HTTP ${r.status}: ${code} ${message}`.trim(), secrets, DETAIL_MAX);
    return { ok: false, transient, error: detail };
  };
}

/** SLS's `{"errorCode","errorMessage"}`, or the text as the message. */
function errorOf(text: string): { code: string; message: string } {
  try {
    const j = JSON.parse(text) as { errorCode?: unknown; errorMessage?: unknown };
    if (typeof j.errorCode === 'string') {
      return { code: j.errorCode, message: typeof j.errorMessage === 'string' ? j.errorMessage : '' };
    }
  } catch {
    // not SLS's envelope
  }
  return { code: '', message: text };
}
