// The `datadog` exporter kind (docs/usage-events.md "Datadog"): each usage event as one Datadog log — the
// reserved attributes, then the event's fields under the GenAI semantic-convention names or `aisix.<field>` —
// and a batch as one gzipped JSON array POSTed to the logs intake with the API key the exporter's
// `credential_ref` names in the environment. AISIX's wire, field for field.
import type { DatadogExporterResource } from '../resources/schema.ts';
import { type CancelSignal, toAbortSignal } from '../util/cancel.ts';
import { jsonText } from '../util/json-text.ts';
import { redactSecrets } from '../util/redact.ts';
import type { CappedContent } from './content.ts';
import { EVENT_MEMBERS, memberValues, type UsageEvent } from './event.ts';
import type { Deliver } from '../observability/delivery-queue.ts';

/** One POST of bytes: the status and the answer's text (an intake's error detail). Throws on transport failure. */
export type PostBytes = (
  url: string,
  headers: Record<string, string>,
  body: Uint8Array<ArrayBuffer>,
  signal: CancelSignal,
) => Promise<{ status: number; text: string }>;

/** AISIX's usage-record version, in every record. */
export const SCHEMA_VERSION = '1.0';
const DETAIL_MAX = 200;

/** The event fields Datadog reads under a GenAI or HTTP semantic-convention name; every other is `aisix.<field>`. */
const RENAMED: Record<string, string> = {
  provider_model_version: 'gen_ai.response.model',
  provider_request_id: 'gen_ai.response.id',
  finish_reason: 'gen_ai.response.finish_reason',
  prompt_tokens: 'gen_ai.usage.input_tokens',
  completion_tokens: 'gen_ai.usage.output_tokens',
  status_code: 'http.response.status_code',
};

/** Each event field's attribute name, made once per field: `aisix.<field>` unless renamed. */
const ATTRIBUTES = new Map<string, string>();
export function attributeOf(field: string): string {
  let a = ATTRIBUTES.get(field);
  if (a === undefined) {
    a = RENAMED[field] ?? `aisix.${field}`;
    // The event's fields are a fixed set; bounded all the same.
    if (ATTRIBUTES.size < 256) ATTRIBUTES.set(field, a);
  }
  return a;
}

/** The intake URL of a `site`: Datadog's over https, a local mock intake over plain http. */
export function intakeUrl(site: string): string {
  const s = site.trim().replace(/\/+$/, '');
  const host = s.split(':')[0];
  return host === 'mock-datadog' || host === '127.0.0.1' || host === 'localhost'
    ? `http://${s}/api/v2/logs`
    : `https://http-intake.logs.${s}/api/v2/logs`;
}

/** `credential_ref` → the environment variable holding the API key: upper-cased, non-alphanumerics as `_`. */
export function apiKeyVariable(ref: string): string {
  return `DD_CRED_${ref.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_API_KEY`;
}

/** Each member's `,"<attribute>":`, in the event's order. */
const HEADS = EVENT_MEMBERS.map((k) => `,${JSON.stringify(attributeOf(k))}:`);

/**
 * The Datadog log of one event, as JSON text: the reserved attributes first, then the event's members set (not
 * undefined, null or empty) under their attribute names, in the event's order, then the captured content.
 */
export function datadogRecord(
  e: UsageEvent,
  d: Pick<DatadogExporterResource, 'ddsource' | 'tags' | 'service'>,
  content?: CappedContent,
): string {
  let out = '{';
  const model = e.provider_model_version || e.model_id || '-';
  out = reserved(out, 'ddsource', d.ddsource);
  if (d.tags.length > 0) out = reserved(out, 'ddtags', d.tags.join(','));
  out = reserved(out, 'service', d.service);
  out = reserved(out, 'message', `ai-gateway request ${e.request_id} model=${model} status=${e.status_code}`);
  out = reserved(out, 'schema_version', SCHEMA_VERSION);
  const values = memberValues(e);
  for (let i = 0; i < HEADS.length; i++) {
    const v = values[i];
    if (v === undefined || v === null || v === '') continue;
    const text = jsonText(v);
    if (text !== undefined) out += HEADS[i]! + text;
  }
  if (content) {
    out += `,"gen_ai.prompt":${jsonText(content.prompt)},"gen_ai.completion":${jsonText(content.response)}`;
    if (content.truncated) out += ',"content_truncated":true';
  }
  return `${out}}`;
}

/** `out` and one reserved attribute (left out when undefined, as `JSON.stringify` does). */
function reserved(out: string, name: string, v: string | undefined): string {
  if (v === undefined) return out;
  return `${out}${out.length > 1 ? ',' : ''}"${name}":${jsonText(v)}`;
}

/** gzip (RFC 1952) through the web platform's CompressionStream, which every runtime has (Workers: the only one). */
export async function gzip(text: string): Promise<Uint8Array<ArrayBuffer>> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** How one Datadog exporter delivers a batch of serialized logs. */
export function datadogDelivery(
  d: Pick<DatadogExporterResource, 'site' | 'credential_ref'>,
  env: Record<string, string | undefined>,
  post: PostBytes,
  zip: (text: string) => Promise<Uint8Array<ArrayBuffer>> = gzip,
): Deliver<string> {
  const url = intakeUrl(d.site);
  // An unresolvable key is sent empty: the intake refuses it (403) and the failure is counted, never skipped.
  const apiKey = env[apiKeyVariable(d.credential_ref)] ?? '';
  const headers = { 'content-type': 'application/json', 'content-encoding': 'gzip', 'dd-api-key': apiKey };
  return async (records, signal) => {
    const body = await zip(`[${records.join(',')}]`);
    const r = await post(url, headers, body, signal);
    if (r.status >= 200 && r.status < 300) return { ok: true };
    const transient = r.status >= 500 || r.status === 429;
    return { ok: false, transient, error: errorDetail(r.status, r.text, apiKey) };
  };
}

/** The intake's `{"errors": […]}` in a line, else its text; at most 200 characters, never the key in any form. */
function errorDetail(status: number, text: string, apiKey: string): string {
  let detail = text;
  try {
    const errors = (JSON.parse(text) as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors.length > 0) detail = errors.map(String).join('; ');
  } catch {
    // not the JSON envelope: the text as it came
  }
  // Scrubbed whole (every encoding of the key) before the cut, which then drops a tail that starts one.
  return redactSecrets(`HTTP ${status}: ${detail}`, apiKey === '' ? [] : [apiKey], DETAIL_MAX);
}

/** A `PostBytes` over a web `fetch` (redirects are answers, never followed). */
export function postBytesThroughFetch(f: typeof fetch = fetch): PostBytes {
  return async (url, headers, body, signal) => {
    const r = await f(url, { method: 'POST', headers, body, signal: toAbortSignal(signal), redirect: 'manual' });
    return { status: r.status, text: await r.text().catch(() => '') };
  };
}
