// OpenAI's audio, image and rerank endpoints on an OpenAI-compatible upstream (docs/media-endpoints.md): the
// caller's JSON (with the target's model) or its multipart form re-encoded, and the answer as it came — a 2xx of
// a relayed endpoint (speech, transcriptions, translations) as a byte stream, since speech is audio and a
// transcription may be text, SRT, VTT or SSE; anything else read whole.
import { encodeForm } from './form.ts';
import type { Endpoint, MediaEndpoint, ProviderCall, ProviderResult } from './types.ts';
import { addKeyHeaders } from './upstream-headers.ts';

const PATHS: Readonly<Record<MediaEndpoint, string>> = {
  audio_speech: '/audio/speech',
  audio_transcriptions: '/audio/transcriptions',
  audio_translations: '/audio/translations',
  images_generations: '/images/generations',
  images_edits: '/images/edits',
  rerank: '/rerank',
};

/** The endpoints whose 2xx answer is relayed as bytes, never read whole. */
const RELAYED: ReadonlySet<Endpoint> = new Set(['audio_speech', 'audio_transcriptions', 'audio_translations']);

/** Every media endpoint. */
export const MEDIA_ENDPOINTS = Object.keys(PATHS) as readonly MediaEndpoint[];

export function isMediaEndpoint(e: Endpoint): e is MediaEndpoint {
  return e in PATHS;
}

export function isRelayed(e: Endpoint): boolean {
  return RELAYED.has(e);
}

/** The endpoint's path under an OpenAI-wire base (`/audio/speech`, …). */
export function mediaPath(e: MediaEndpoint): string {
  return PATHS[e];
}

/**
 * One call to `url` (the adapter's URL of the endpoint) with `credentials` (the adapter's own headers, which the
 * key's headers never replace).
 */
export async function callMedia(
  c: ProviderCall,
  url: string,
  credentials: Record<string, string>,
): Promise<ProviderResult> {
  const headers: Record<string, string> = { ...credentials };
  if (c.traceparent) headers.traceparent = c.traceparent;
  if (c.requestId) headers['x-aisix-request-id'] = c.requestId;
  let body: string | Uint8Array<ArrayBuffer>;
  if (c.form) {
    // The key's `drop_body_fields` drop a form's fields as they drop a JSON body's members.
    const drop = c.key.drop_body_fields;
    const form = encodeForm(drop ? c.form.filter((p) => !drop.includes(p.name)) : c.form, c.body);
    body = form.body;
    headers['content-type'] = form.contentType;
  } else {
    body = JSON.stringify(c.body);
    headers['content-type'] = 'application/json';
  }
  addKeyHeaders(headers, c);
  const res = await c.upstream({
    url,
    method: 'POST',
    headers,
    body,
    signal: c.signal,
    tls: c.key.tls,
  });
  if (isRelayed(c.endpoint) && res.status >= 200 && res.status < 300) {
    // Content-Length is left to the runtime: a client that decoded a compressed answer keeps the old one.
    const contentType = res.header('content-type') ?? 'application/octet-stream';
    return { kind: 'stream', chunks: res.body, cancel: () => res.discard(), headers: { 'content-type': contentType } };
  }
  return {
    kind: 'response',
    status: res.status,
    body: await res.text(),
    contentType: res.header('content-type') ?? 'application/json',
    retryAfter: res.header('retry-after'),
  };
}
