// The audio, image and rerank endpoints in the request pipeline (docs/media-endpoints.md): their multipart body
// step, the relay of a byte answer (speech, transcriptions) with its usage commit at the last byte, rerank's
// usage, and their part of the request's record. The parsing and reading live in src/media/.
import { errors, fromFailure, ProxyError } from '../http/errors.ts';
import type { Scrub } from '../http/scrub.ts';
import { readMultipart } from '../media/multipart.ts';
import { keepsText, relayBody } from '../media/relay.ts';
import { audioSeconds, headOf, speechCharacters, wavSeconds } from '../media/usage.ts';
import { type FormPart, partBytes } from '../providers/form.ts';
import { UpstreamStreamError } from '../providers/types.ts';
import type { DispatchResult } from '../routing/dispatch.ts';
import type { Clock } from '../util/clock.ts';
import { commitUsage, fail, stamped } from './answer.ts';
import type { StreamTracker } from './env.ts';
import type { ModelCall, Step, StepResult } from './pipeline.ts';
import { MEDIA_RECORD } from './media-usage.ts';
import { isReported, readBody, totalOf, type Usage } from './usage.ts';
import { MAX_MODEL_NAME } from './validate.ts';

// The field's bytes as they are: a leading BOM is kept, so a field sent again is the one received.
const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A text field longer than this is forwarded but not read into the call's body (a prompt is far shorter). */
const MAX_READ_FIELD_BYTES = 1_048_576;

/** The `read body` step: a multipart route's form (`form` routes), else `json` (the JSON body step). */
export function mediaBodyStep(limit: number, json: Step): Step {
  return {
    name: 'read body',
    run: (call) => call.route.form ? readForm(call, limit) : json.run(call),
  };
}

/** Text of valid UTF-8, else undefined. */
function utf8(bytes: Uint8Array): string | undefined {
  try {
    return strict.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * The form read under the limit, its text fields in `call.body` (the first of each name), AISIX's checks in its
 * words: the `model` field, a `prompt` that is not UTF-8 (refused before anything is sent), `stream` on edits.
 */
async function readForm(call: ModelCall, limit: number): Promise<StepResult> {
  const parts = await readMultipart(call.c.req.raw, limit);
  if (parts instanceof ProxyError) return parts;
  const body: Record<string, unknown> = {};
  const seen = new Set<string>();
  for (const p of parts) {
    // Only the first part of a name is read: the upstream form carries the body's text in its place.
    const first = !seen.has(p.name);
    seen.add(p.name);
    if (p.filename !== undefined || p.size > MAX_READ_FIELD_BYTES) continue;
    const text = utf8(partBytes(p));
    if (text === undefined && p.name === 'prompt') {
      return errors.badRequest('request payload is invalid: `prompt` field is not valid UTF-8');
    }
    if (text !== undefined && first) body[p.name] = p.name === 'model' ? text.trim() : text;
  }
  const model = modelOf(parts, body);
  if (model instanceof ProxyError) return model;
  if (call.route.call === 'images_edits' && typeof body.stream === 'string' && body.stream.trim() === 'true') {
    return errors.badRequest('request payload is invalid: `stream` is not supported on /v1/images/edits');
  }
  call.body = body;
  call.form = parts;
  return undefined;
}

/** The form's model: its first `model` field, valid UTF-8 and trimmed. */
function modelOf(parts: readonly FormPart[], body: Record<string, unknown>): string | ProxyError {
  const first = parts.find((p) => p.name === 'model');
  const model = first && first.filename === undefined ? body.model : undefined;
  if (typeof model !== 'string' || model === '') {
    return errors.badRequest('request payload is invalid: `model` field missing from form');
  }
  if (model.length > MAX_MODEL_NAME) {
    return errors.badRequest(`\`model\` must be at most ${MAX_MODEL_NAME} characters (it has ${model.length})`);
  }
  return model;
}

/** What the relay needs from the answerer. */
export interface RelayDeps {
  clock: Clock;
  scrub: () => Scrub;
  /** The answer's headers beyond the upstream's content type (served-by, rate limits). */
  headers: Record<string, string>;
}

/**
 * A relayed answer: the upstream's first bytes awaited (a failure before them is the caller's error answer),
 * then its bytes as they come; the record, the usage commit and the tracking once the last byte is out.
 */
export async function relayAnswer(
  call: ModelCall,
  r: Extract<DispatchResult, { kind: 'stream' }>,
  d: RelayDeps,
): Promise<Response> {
  const it = r.chunks[Symbol.asyncIterator]();
  let first: IteratorResult<Uint8Array>;
  try {
    first = await it.next();
  } catch (e) {
    const kind = e instanceof UpstreamStreamError ? e.kind : 'upstream_error';
    r.settle(kind);
    void call.permit.end();
    const message = e instanceof UpstreamStreamError ? d.scrub()(e.message) : 'upstream failed before its answer';
    return fail(call.c, fromFailure({ kind, status: kind === 'upstream_timeout' ? 504 : 502, message }));
  }
  if (first.done) {
    r.settle('client_closed');
    void call.permit.end();
    call.rec.failed('client_closed', 'the caller closed the connection before the answer');
    return new Response(null, { status: 499 });
  }
  if (call.route.call === 'audio_speech') call.rec.facet(MEDIA_RECORD).characters = speechCharacters(call.body);
  const tracker: StreamTracker = { onEnd: undefined };
  call.c.set('stream', tracker);
  const contentType = d.headers['content-type'] ?? 'application/octet-stream';
  const body = relayBody(first.value, it, keepsText(contentType), {
    abort: () => r.abort(),
    onEnd: (end, kept, detail) => {
      r.settle(end);
      if (end !== 'complete') call.rec.streamFailed(end, detail);
      call.rec.firstToken(r.ttftMs?.());
      let usage: Usage | undefined;
      if (kept !== undefined) {
        const read = readBody(kept);
        usage = isReported(read.usage) ? read.usage : undefined;
        call.rec.read(usage, read.id);
      }
      const seconds = (kept !== undefined ? audioSeconds(kept) : undefined) ?? probedSeconds(call.form);
      if (seconds !== undefined) call.rec.facet(MEDIA_RECORD).audioSeconds = seconds;
      void commitUsage(call, totalOf(usage));
      tracker.onEnd?.(end);
    },
  });
  call.rec.firstByte(d.clock());
  return stamped(call, body, 200, { ...d.headers, 'content-type': contentType });
}

/** The duration of the form's uploaded `file` read from its header (WAV only), when the answer stated none. */
function probedSeconds(form: readonly FormPart[] | undefined): number | undefined {
  const file = form?.find((p) => p.name === 'file' && p.filename !== undefined);
  return file ? wavSeconds(headOf(file.chunks)) : undefined;
}
