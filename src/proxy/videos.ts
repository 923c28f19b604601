// `POST /v1/videos`, `GET /v1/videos/{id}` and `GET /v1/videos/{id}/content` (docs/batch-files-endpoints.md
// "Videos"): one JSON shape over five vendors (video-vendors.ts). Nothing is stored: the video id carries the
// model row, the caller's model name and the upstream task id. A completed video is a redirect to the vendor's
// signed URL, or (OpenAI) proxied with the gateway's credential.
import { unscannedRefusal } from './unscanned.ts';
import type { Context } from 'hono';
import { errors, ProxyError } from '../http/errors.ts';
import { pathParams } from '../http/path-param.ts';
import { fail } from './answer.ts';
import { modelAllowed } from './auth.ts';
import { INVALID_JSON, readJsonObject, readLimited } from './body.ts';
import { relayBody } from './body-relay.ts';
import { acquirePermit, keyAndModelSubjects } from './call-quota.ts';
import type { ProxyEnv } from './env.ts';
import { type JobsDeps, scrubFor } from './jobs.ts';
import type { Scrub } from '../http/scrub.ts';
import type { RequestStep } from './pipeline.ts';
import { identified } from './identified.ts';
import { ProxyRequest } from './request.ts';
import type { VideosRoute } from './routes.ts';
import type { DirectModel, ProviderKey } from '../resources/schema.ts';
import { ipAllowed } from '../util/cidr.ts';
import { base64UrlDecode, base64UrlEncode, unsafeId } from '../endpoints/routed-id.ts';
import { deadlineMs, openAiBase, timedFetch, upstreamHeaders } from '../endpoints/upstream.ts';
import { isMultipart } from '../endpoints/upload.ts';
import { type VideoAsk, type VideoTask, type VideoVendor, videoVendor } from '../endpoints/video-vendors.ts';

type Handler = (c: Context<ProxyEnv>) => Promise<Response>;

const invalid = (m: string) => errors.badRequest(`request payload is invalid: ${m}`);
const videoNotFound = (id: string) => new ProxyError(404, 'video_not_found', `video "${id}" not found`);

/** A video id: base64url("<model row id>:<base64url(the caller's model name)>:<upstream task id>"). */
export function encodeVideoId(modelId: string, asked: string, task: string): string {
  return base64UrlEncode(`${modelId}:${base64UrlEncode(asked)}:${task}`);
}

export function decodeVideoId(id: string): { modelId: string; asked: string; task: string } | undefined {
  const text = base64UrlDecode(id);
  if (text === undefined) return undefined;
  const a = text.indexOf(':');
  const b = a < 0 ? -1 : text.indexOf(':', a + 1);
  if (a <= 0 || b <= a + 1 || b === text.length - 1) return undefined;
  const asked = base64UrlDecode(text.slice(a + 1, b));
  if (!asked) return undefined;
  return { modelId: text.slice(0, a), asked, task: text.slice(b + 1) };
}

/** A served video target: the row, its key, its vendor and the root its paths join. */
interface VideoTarget {
  model: DirectModel;
  key: ProviderKey;
  vendor: VideoVendor;
  root: string;
  secret: string;
}

function targetOf(model: DirectModel, key: ProviderKey | undefined): VideoTarget | ProxyError {
  const provider = model.provider ?? key?.provider;
  const vendor = videoVendor(provider);
  if (!vendor) {
    return new ProxyError(501, 'not_implemented', `provider "${provider ?? ''}" is not yet supported on /v1/videos`);
  }
  if (!key || key.api_key === undefined) {
    return new ProxyError(503, 'provider_unavailable', `model "${model.display_name}" has no usable provider_key`);
  }
  const base = vendor === videoVendor('openai') ? openAiBase(key) : (key.api_base ?? '').trim();
  if (base instanceof ProxyError) return base;
  if (base === '') return invalid(`provider_key "${key.display_name}" has no api_base configured`);
  return { model, key, vendor, root: vendor.root(base), secret: key.api_key };
}

/**
 * A vendor's refusal as the caller sees it: a 4xx keeps its status with `<code>: <message>`; a 5xx is a 502.
 * The message is scrubbed before it is cut, so no credential the vendor echoes reaches the caller or the log.
 */
function upstreamRefusal(status: number, text: string, retryAfter: string | null, scrub: Scrub): ProxyError {
  if (status >= 500) return errors.upstream(`upstream returned ${status}`);
  let message = scrub(text, 1024);
  try {
    const j = JSON.parse(text) as Record<string, unknown>;
    const e = (typeof j.error === 'object' && j.error !== null ? j.error : j) as Record<string, unknown>;
    const code = e.code ?? e.failureCode;
    const msg = e.message ?? e.failure;
    if (typeof msg === 'string') message = scrub(typeof code === 'string' ? `${code}: ${msg}` : msg);
  } catch { /* the raw text stays the message */ }
  const headers = status === 429 && retryAfter && /^\d+$/.test(retryAfter) ? { 'retry-after': retryAfter } : undefined;
  return new ProxyError(status, 'upstream_error', message, undefined, headers);
}

/** What serving one video route reads, made once per route. */
interface Videos {
  readonly d: JobsDeps;
  readonly route: VideosRoute;
  readonly limit: number;
}

export function videosCall(d: JobsDeps, identify: RequestStep, route: VideosRoute): Handler {
  const v: Videos = { d, route, limit: d.config.proxy.request_body_limit_bytes };
  const serve = route.path === '/v1/videos' ? submit : route.path.endsWith('/content') ? content : retrieve;
  return async function handleVideos(c) {
    const req = await identified(c, identify);
    if (req instanceof Response) return req;
    return serve(v, c, req);
  };
}

/** The headers of a call to the vendor: the target's credential, the key's templates, then `more`. */
function videoHeaders(
  c: Context<ProxyEnv>,
  req: ProxyRequest,
  t: VideoTarget,
  more: Record<string, string> = {},
): Record<string, string> {
  return upstreamHeaders(
    {
      key: t.key,
      model: t.model,
      apiKey: req.caller.key,
      callerHeaders: c.req.raw.headers,
      requestId: req.rec.requestId,
    },
    { authorization: `Bearer ${t.secret}` },
    more,
  );
}

/** One JSON exchange with the vendor. */
async function exchange(
  v: Videos,
  c: Context<ProxyEnv>,
  req: ProxyRequest,
  t: VideoTarget,
  call: { url: string; body?: unknown; headers?: Record<string, string> },
): Promise<Record<string, unknown> | ProxyError> {
  const d = v.d;
  const headers = videoHeaders(c, req, t, {
    ...(call.body !== undefined ? { 'content-type': 'application/json' } : {}),
    ...call.headers,
  });
  const sent = await timedFetch(
    d.upstream,
    {
      url: call.url,
      method: call.body !== undefined ? 'POST' : 'GET',
      headers,
      ...(call.body !== undefined ? { body: JSON.stringify(call.body) } : {}),
      ...(t.key.tls ? { tls: t.key.tls } : {}),
    },
    deadlineMs(t.model, d.config),
    c.env?.closed,
  );
  if (sent instanceof ProxyError) return sent;
  let text: string;
  try {
    text = await sent.response.text();
  } catch (e) {
    return new ProxyError(502, 'upstream_error', `upstream_decode_error: ${e instanceof Error ? e.message : e}`);
  } finally {
    sent.done();
  }
  const r = sent.response;
  if (r.status < 200 || r.status > 299) {
    return upstreamRefusal(r.status, text, r.header('retry-after'), scrubFor(req, d));
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
      return parsed as Record<string, unknown>;
    }
  } catch { /* below */ }
  return errors.upstream('upstream returned an unparseable body');
}

/** A submit the gateway may send on: what the caller asked for, and the target it goes to. */
interface Submission {
  asked: string;
  prompt: string;
  secs: number | undefined;
  size: unknown;
  model: DirectModel;
  t: VideoTarget;
  upstreamModel: string;
}

/** The submit's body, the caller's model and its target, in AISIX's order of refusals. */
async function admitSubmit(v: Videos, c: Context<ProxyEnv>, req: ProxyRequest): Promise<Submission | ProxyError> {
  const body = isMultipart(c.req.header('content-type') ?? null)
    ? await readFormFields(c.req.raw, v.limit)
    : await readJsonObject(c.req.raw, v.limit);
  if (body instanceof ProxyError) return body;
  const { model: asked, prompt, seconds, size } = body;
  if (typeof asked !== 'string' || typeof prompt !== 'string') return errors.badRequest(INVALID_JSON);
  if (!modelAllowed(req.caller.key, asked)) return errors.modelNotAllowed(asked);
  const resolved = req.caller.snapshot.resolveModel(asked);
  if (!resolved) return errors.unknownModel(asked);
  const model = resolved.model;
  req.rec.resolved(model, asked);
  const unscanned = unscannedRefusal(req.caller.snapshot, model, req.caller.key, '/v1/videos');
  if (unscanned) return unscanned;
  if (model.kind !== 'direct') {
    return invalid(`model "${asked}" has no provider (routing models can't be dispatched directly)`);
  }
  const secs = secondsOf(seconds);
  if (secs instanceof ProxyError) return secs;
  if (prompt.trim() === '') return invalid('`prompt` must not be empty');
  if (!ipAllowed(model.allowed_cidrs, v.d.clientIpOf(c.env?.peer, c.req.raw.headers))) {
    return errors.ipRestricted();
  }
  const key = req.caller.snapshot.providerKeys.get(model.provider_key_id);
  const t = targetOf(model, key);
  if (t instanceof ProxyError) return t;
  const upstreamModel = resolved.upstreamModel ?? model.model_name;
  return { asked, prompt, secs, size, model, t, upstreamModel };
}

async function submit(v: Videos, c: Context<ProxyEnv>, req: ProxyRequest): Promise<Response> {
  const s = await admitSubmit(v, c, req);
  if (s instanceof ProxyError) return fail(c, s);
  const { asked, secs, size, model, t, upstreamModel } = s;
  req.rec.dispatching(false, { model, key: t.key, upstreamModel });
  const permit = await reserve(v, req, model);
  if (permit instanceof ProxyError) return fail(c, permit);
  try {
    const dims = sizeOf(size);
    if (dims instanceof ProxyError) return fail(c, dims);
    const ask: VideoAsk = {
      model: upstreamModel,
      prompt: s.prompt,
      ...(secs !== undefined ? { seconds: secs } : {}),
      ...(dims ? { size: dims } : {}),
    };
    const answer = await exchange(v, c, req, t, t.vendor.submit(t.root, ask));
    if (answer instanceof ProxyError) return fail(c, answer);
    const task = t.vendor.submitted(answer);
    if (!task) {
      return fail(c, errors.upstream('upstream returned an unparseable body: submit response has no task id'));
    }
    req.rec.firstByte(v.d.clock());
    return c.json({
      id: encodeVideoId(model.id, asked, task.id),
      object: 'video',
      model: asked,
      status: task.status,
      progress: task.status === 'completed' ? 100 : 0,
      created_at: Math.floor(v.d.clock() / 1000),
      ...(secs !== undefined ? { seconds: String(secs) } : {}),
      ...(typeof size === 'string' ? { size } : {}),
    });
  } finally {
    void permit.end();
  }
}

/** The caller's key layers only: polling never spends the model's requests per minute. */
function reserve(v: Videos, req: ProxyRequest, model?: DirectModel) {
  return acquirePermit(v.d.rateLimiter, keyAndModelSubjects(req.caller.key, model));
}

/** The video a GET names, and its vendor task, or the refusal (every kind of "not yours" is the same 404). */
async function poll(v: Videos, c: Context<ProxyEnv>, req: ProxyRequest) {
  // Hono hands a malformed escape over undecoded: read the raw segment, for AISIX's 400.
  const params = pathParams(v.route.path, new URL(c.req.url).pathname);
  if (params === undefined) return errors.notFound(c.req.path);
  if (params instanceof ProxyError) return params;
  const id = params.id ?? '';
  const named = decodeVideoId(id);
  const row = named ? req.caller.snapshot.models.get(named.modelId) : undefined;
  if (!named || !row || row.kind !== 'direct' || !modelAllowed(req.caller.key, named.asked)) return videoNotFound(id);
  const t = targetOf(row, req.caller.snapshot.providerKeys.get(row.provider_key_id));
  if (t instanceof ProxyError) return t.status === 501 ? videoNotFound(id) : t;
  req.rec.resolved(row, named.asked);
  req.rec.dispatching(false, { model: row, key: t.key, upstreamModel: row.model_name });
  if (!ipAllowed(row.allowed_cidrs, v.d.clientIpOf(c.env?.peer, c.req.raw.headers))) return errors.ipRestricted();
  const bad = unsafeId(named.task);
  if (bad) return bad;
  const permit = await reserve(v, req);
  if (permit instanceof ProxyError) return permit;
  try {
    const answer = await exchange(v, c, req, t, t.vendor.poll(t.root, named.task));
    if (answer instanceof ProxyError) return answer;
    return { id, v: named, t, task: t.vendor.read(answer) };
  } finally {
    void permit.end();
  }
}

async function retrieve(v: Videos, c: Context<ProxyEnv>, req: ProxyRequest): Promise<Response> {
  const p = await poll(v, c, req);
  if (p instanceof ProxyError) return fail(c, p);
  req.rec.firstByte(v.d.clock());
  return c.json(pollAnswer(p.id, p.v.asked, p.task));
}

async function content(v: Videos, c: Context<ProxyEnv>, req: ProxyRequest): Promise<Response> {
  const p = await poll(v, c, req);
  if (p instanceof ProxyError) return fail(c, p);
  const { task, t } = p;
  if (task.status === 'queued' || task.status === 'in_progress') {
    return fail(
      c,
      invalid(
        `video is not ready for download (status: ${task.status}); poll GET /v1/videos/{video_id} until status is "completed"`,
      ),
    );
  }
  if (task.status === 'failed') {
    return fail(c, invalid(`video generation failed: ${task.error?.message ?? task.error?.code ?? 'unknown'}`));
  }
  if (!t.vendor.proxied) {
    if (!task.url || !/^https?:\/\/[^/]/i.test(task.url)) {
      return fail(c, errors.upstream('upstream returned no valid video URL'));
    }
    req.rec.firstByte(v.d.clock());
    return new Response(null, { status: 302, headers: { location: task.url } });
  }
  return proxyContent(v, c, req, t, p.v.task);
}

async function proxyContent(v: Videos, c: Context<ProxyEnv>, req: ProxyRequest, t: VideoTarget, task: string) {
  const d = v.d;
  const headers = videoHeaders(c, req, t);
  // The download is bounded by the stream budget, not the request deadline: a video can be large.
  const ms = t.model.stream_timeout || d.config.upstream.stream_timeout_ms || deadlineMs(t.model, d.config);
  const sent = await timedFetch(
    d.upstream,
    {
      url: t.vendor.proxied!(t.root, task),
      method: 'GET',
      headers,
      ...(t.key.tls ? { tls: t.key.tls } : {}),
    },
    ms,
    c.env?.closed,
  );
  if (sent instanceof ProxyError) return fail(c, sent);
  const r = sent.response;
  if (r.status < 200 || r.status > 299) {
    const text = await r.text().catch(() => '');
    sent.done();
    return fail(c, upstreamRefusal(r.status, text, r.header('retry-after'), scrubFor(req, d)));
  }
  const out: Record<string, string> = {
    'content-type': r.header('content-type') ?? 'video/mp4',
    'content-disposition': 'attachment; filename="video.mp4"',
  };
  const length = r.header('content-length');
  if (length !== null) out['content-length'] = length;
  req.rec.firstByte(d.clock());
  return relayBody(c, r.body, r.status, out, sent.done);
}

function pollAnswer(id: string, asked: string, task: VideoTask) {
  const failed = task.status === 'failed';
  return {
    id,
    object: 'video',
    model: asked,
    status: task.status,
    progress: task.progress ?? (task.status === 'completed' ? 100 : 0),
    created_at: 0,
    ...(task.seconds !== undefined ? { seconds: task.seconds } : {}),
    ...(failed
      ? {
        error: {
          code: task.error?.code ?? 'video_generation_failed',
          message: task.error?.message ?? 'video generation failed',
        },
      }
      : {}),
  };
}

/**
 * The text fields of a multipart submit, which OpenAI's Node SDK always sends (AISIX refuses it). A file part
 * (`input_reference`) is not sent on: no vendor here takes one.
 */
async function readFormFields(req: Request, limit: number): Promise<Record<string, unknown> | ProxyError> {
  let bytes: Uint8Array | ProxyError;
  try {
    bytes = await readLimited(req, limit);
  } catch {
    return invalid('failed to read request body');
  }
  if (bytes instanceof ProxyError) return bytes;
  try {
    // readLimited makes its own buffer: an ArrayBuffer, never a shared one.
    const form = await new Response(bytes as Uint8Array<ArrayBuffer>, {
      headers: { 'content-type': req.headers.get('content-type') ?? '' },
    }).formData();
    const out: Record<string, unknown> = {};
    for (const [k, v] of form) if (typeof v === 'string') out[k] = v;
    return out;
  } catch {
    return invalid('invalid multipart form data');
  }
}

/** `seconds`: a positive integer, as a number or a string of digits. */
function secondsOf(v: unknown): number | undefined | ProxyError {
  if (v === undefined || v === null) return undefined;
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v.trim()) ? Number(v.trim()) : NaN;
  if (Number.isInteger(n) && n > 0) return n;
  return typeof v === 'string'
    ? invalid(`\`seconds\` must be a positive integer, got "${v}"`)
    : invalid('`seconds` must be a positive integer');
}

/** `size`: `WIDTHxHEIGHT`, at most five digits each. */
function sizeOf(v: unknown): { w: number; h: number } | undefined | ProxyError {
  if (v === undefined || v === null) return undefined;
  const m = typeof v === 'string' ? /^(\d{1,5})x(\d{1,5})$/.exec(v) : null;
  if (!m) return invalid(`\`size\` must be formatted as WIDTHxHEIGHT (e.g. "1280x720"), got "${String(v)}"`);
  return { w: Number(m[1]), h: Number(m[2]) };
}
