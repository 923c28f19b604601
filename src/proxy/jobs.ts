// The files, batches and fine-tuning routes (docs/batch-files-endpoints.md): identify → parse → pick the model
// row → the key's and the model's rate limits → one upstream call (no retry) → the answer relayed with its
// status, the ids it names routed. The pieces that know no proxy (ids, target, URLs, the upload's form, a
// completed batch's accounting) are src/endpoints/.
import { unscannedRefusal } from './unscanned.ts';
import type { Context } from 'hono';
import type { Config } from '../config/schema.ts';
import { errors, ProxyError } from '../http/errors.ts';
import { pathParams } from '../http/path-param.ts';
import { bearerToken } from '../http/auth.ts';
import { type Scrub, scrubberFor } from '../http/scrub.ts';
import type { Logger } from '../observability/logger.ts';
import type { UpstreamFetch } from '../platform.ts';
import { fail } from './answer.ts';
import { readLimited } from './body.ts';
import type { ProxyEnv } from './env.ts';
import type { RequestStep } from './pipeline.ts';
import { identified } from './identified.ts';
import { ProxyRequest } from './request.ts';
import type { JobsRoute } from './routes.ts';
import type { Permit, RateLimiter } from '../routing/rate-limit.ts';
import type { Clock } from '../util/clock.ts';
import { BatchUsage } from '../endpoints/batch-usage.ts';
import { explicitModel, type JobTarget, resolveJobTarget } from '../endpoints/jobs-target.ts';
import { urlOf } from '../endpoints/jobs-url.ts';
import { decodeRoutedId, encodeRoutedId, unsafeId } from '../endpoints/routed-id.ts';
import { deadlineMs, timedFetch, upstreamHeaders } from '../endpoints/upstream.ts';
import { INVALID_MULTIPART, isMultipart, parseUpload } from '../endpoints/upload.ts';
import { modelAllowed } from './auth.ts';
import { relayBody } from './body-relay.ts';
import { acquirePermit, keyAndModelSubjects } from './call-quota.ts';

export interface JobsDeps {
  readonly config: Config;
  readonly upstream: UpstreamFetch;
  readonly rateLimiter: Pick<RateLimiter, 'acquire'>;
  readonly clock: Clock;
  readonly log: Logger;
  /** The caller's address as `allowed_cidrs` sees it (`proxy.real_ip`). */
  readonly clientIpOf: (peer: string | undefined, headers: Headers) => string | undefined;
  /** config.yaml's secrets (`configSecrets`), scrubbed with the snapshot's from what an upstream answers. */
  readonly configSecrets?: readonly string[];
}

type Handler = (c: Context<ProxyEnv>) => Promise<Response>;

/** Top-level members of an answer that name files or jobs, rewritten to routed ids. */
const ID_FIELDS = ['id', 'input_file_id', 'output_file_id', 'error_file_id', 'training_file', 'validation_file'];

/** The field a create body routes by, and is required: the file it reads. */
const CREATE_FILE_FIELD = { batches: 'input_file_id', fine_tuning: 'training_file' } as const;

/** What one call asks the upstream for, once parsed. */
interface Operation {
  /** The upstream path under the base (`/files`, `/batches/<raw id>/cancel`). */
  path: string;
  method: 'GET' | 'POST' | 'DELETE';
  /** The model row named by a routed id or the body; undefined: the query, the header, or the default. */
  routedModel?: string;
  body?: { bytes: Uint8Array<ArrayBuffer>; contentType: string };
  /** List routes forward the caller's query (less the routing hints); id routes none. */
  forwardQuery: boolean;
  /** Rewrite the answer's ids (create, retrieve, cancel, delete); lists are relayed as they are. */
  rewrite: boolean;
  /** Stream the answer as it comes (file content). */
  raw: boolean;
  /** The raw id of a retrieved batch, for its usage attribution. */
  batchId?: string;
}

/** What serving one jobs route reads, made once per route. */
interface Jobs {
  readonly d: JobsDeps;
  readonly route: JobsRoute;
  readonly limit: number;
  readonly batchUsage: BatchUsage;
}

export function jobsCall(d: JobsDeps, identify: RequestStep, route: JobsRoute): Handler {
  const limit = d.config.proxy.request_body_limit_bytes;
  const log = d.log.withTarget('aisix_proxy::jobs');
  const j: Jobs = { d, route, limit, batchUsage: new BatchUsage(d.upstream, log) };
  return async function handleJobs(c) {
    const req = await identified(c, identify);
    if (req instanceof Response) return req;
    const op = await operationOf(c, route, limit);
    if (op instanceof ProxyError) return fail(c, op);
    const url = new URL(c.req.url);
    const target = admitJob(j, c, req, op, url);
    if (target instanceof ProxyError) return fail(c, target);
    const permit = await acquirePermit(d.rateLimiter, keyAndModelSubjects(req.caller.key, target.model));
    if (permit instanceof ProxyError) return fail(c, permit);
    const sent = await sendJob(j, c, req, op, target, url);
    if (sent instanceof ProxyError) {
      void permit.end();
      return fail(c, sent);
    }
    return relayJobAnswer(j, c, req, { op, target, sent, permit });
  };
}

/** The model row the call goes to (its key's `allowed_models`, `allowed_cidrs`, guardrails), or the refusal. */
function admitJob(j: Jobs, c: Context<ProxyEnv>, req: ProxyRequest, op: Operation, url: URL): JobTarget | ProxyError {
  const wanted = op.routedModel ?? explicitModel(url, c.req.raw.headers);
  const clientIp = j.d.clientIpOf(c.env?.peer, c.req.raw.headers);
  const target = resolveJobTarget(req.caller.snapshot, (m) => modelAllowed(req.caller.key, m), wanted, clientIp);
  if (target instanceof ProxyError) return target;
  const rec = req.rec;
  rec.resolved(target.model);
  rec.dispatching(false, { model: target.model, key: target.key, upstreamModel: target.model.model_name });
  // What carries content (an upload, a create, a file's content) is refused where a guardrail applies.
  if (op.body !== undefined || op.raw) {
    const unscanned = unscannedRefusal(req.caller.snapshot, target.model, req.caller.key, j.route.path);
    if (unscanned) return unscanned;
  }
  return target;
}

/** The one upstream call (no retry), under the model's deadline and the caller's hang-up. */
async function sendJob(
  j: Jobs,
  c: Context<ProxyEnv>,
  req: ProxyRequest,
  op: Operation,
  target: JobTarget,
  url: URL,
): Promise<Sent | ProxyError> {
  const d = j.d;
  const upstreamUrl = urlOf(target, op, op.forwardQuery ? forwardableQuery(url) : '');
  if (upstreamUrl instanceof ProxyError) return upstreamUrl;
  const credential: Record<string, string> = target.adapter === 'azure-openai'
    ? { 'api-key': target.secret }
    : { authorization: `Bearer ${target.secret}` };
  const headers = upstreamHeaders(
    {
      key: target.key,
      model: target.model,
      apiKey: req.caller.key,
      callerHeaders: c.req.raw.headers,
      requestId: req.rec.requestId,
    },
    credential,
    op.body ? { 'content-type': op.body.contentType } : {},
  );
  const ms = deadlineMs(target.model, d.config);
  return await timedFetch(
    d.upstream,
    {
      url: upstreamUrl,
      method: op.method,
      headers,
      ...(op.body ? { body: op.body.bytes } : {}),
      ...(target.key.tls ? { tls: target.key.tls } : {}),
    },
    ms,
    c.env?.closed,
  );
}

type Sent = Exclude<Awaited<ReturnType<typeof timedFetch>>, ProxyError>;

/** The upstream's answer to the caller: raw content streamed, else read whole with its ids routed. */
async function relayJobAnswer(
  j: Jobs,
  c: Context<ProxyEnv>,
  req: ProxyRequest,
  { op, target, sent, permit }: { op: Operation; target: JobTarget; sent: Sent; permit: Permit },
): Promise<Response> {
  const rec = req.rec;
  const { response: r, done } = sent;
  const contentType = r.header('content-type') ?? 'application/json';
  rec.firstByte(j.d.clock());
  if (op.raw && r.status >= 200 && r.status < 300) {
    const out: Record<string, string> = { 'content-type': contentType };
    const length = r.header('content-length');
    if (length !== null) out['content-length'] = length;
    return relayBody(c, r.body, r.status, out, () => {
      done();
      void permit.end();
    });
  }
  let text: string;
  try {
    text = await r.text();
  } catch (e) {
    void permit.end();
    return fail(c, errors.upstream(`upstream answer could not be read: ${e instanceof Error ? e.message : e}`));
  } finally {
    done();
  }
  void permit.end();
  // Upstream refusals are relayed as they came (AISIX), the status with them.
  if (r.status < 200 || r.status > 299) rec.failed('upstream_error', `upstream returned ${r.status}`);
  const ok = r.status >= 200 && r.status < 300;
  const json = ok && (op.rewrite || op.batchId) ? parseObject(text) : undefined;
  if (json && op.batchId !== undefined) {
    j.batchUsage.observe(op.batchId, json, target, c.req.raw.headers, req.caller.key);
  }
  // A refusal is relayed, but never a credential it echoes (docs/security.md "Secrets in answers and logs").
  const relayed = ok ? text : scrubFor(req, j.d)(text);
  const body = json && op.rewrite ? JSON.stringify(rewriteIds(json, target.model.display_name)) : relayed;
  return new Response(body, { status: r.status, headers: { 'content-type': contentType } });
}

/** `POST /v1/files`'s form: multipart only, read within the body limit. */
async function readUpload(req: Request, limit: number) {
  const type = req.headers.get('content-type');
  if (!isMultipart(type)) return INVALID_MULTIPART;
  let bytes: Uint8Array | ProxyError;
  try {
    bytes = await readLimited(req, limit);
  } catch {
    return errors.badRequest('request payload is invalid: failed to read request body');
  }
  if (bytes instanceof ProxyError) return bytes;
  return parseUpload(bytes, type ?? '');
}

/** The path's `:id`, decoded; a malformed percent-encoding is the caller's 400 (AISIX's). */
function idParam(c: Context<ProxyEnv>, route: JobsRoute): string | ProxyError {
  const params = pathParams(route.path, new URL(c.req.url).pathname);
  if (params === undefined) return errors.notFound(c.req.path);
  return params instanceof ProxyError ? params : params.id ?? '';
}

/** The id an upstream URL names: a routed id's raw part (and its model), else the id as given. */
function upstreamId(id: string): { raw: string; model?: string } | ProxyError {
  const routed = decodeRoutedId(id);
  const raw = routed?.raw ?? id;
  const bad = unsafeId(raw);
  if (bad) return bad;
  return routed ?? { raw };
}

async function operationOf(c: Context<ProxyEnv>, route: JobsRoute, limit: number): Promise<Operation | ProxyError> {
  const method = c.req.method;
  const family = route.family;
  const base = family === 'fine_tuning' ? '/fine_tuning/jobs' : `/${family}`;
  const collection = route.path === `/v1${base}`;
  if (collection && method === 'GET') {
    return { path: base, method: 'GET', forwardQuery: true, rewrite: false, raw: false };
  }
  if (collection && method === 'POST') {
    if (family === 'files') {
      const upload = await readUpload(c.req.raw, limit);
      // The web parser needs the whole form: read within the body limit, as every multipart route's.
      if (upload instanceof ProxyError) return upload;
      return {
        path: base,
        method: 'POST',
        ...(upload.model !== undefined ? { routedModel: upload.model } : {}),
        body: upload.body,
        forwardQuery: false,
        rewrite: true,
        raw: false,
      };
    }
    return createOperation(c, base, family, limit);
  }
  const id = idParam(c, route);
  if (id instanceof ProxyError) return id;
  const up = upstreamId(id);
  if (up instanceof ProxyError) return up;
  const routed = up.model !== undefined ? { routedModel: up.model } : {};
  const path = `${base}/${up.raw}`;
  if (route.path.endsWith('/content')) {
    return { path: `${path}/content`, method: 'GET', ...routed, forwardQuery: false, rewrite: false, raw: true };
  }
  if (route.path.endsWith('/cancel')) {
    return { path: `${path}/cancel`, method: 'POST', ...routed, forwardQuery: false, rewrite: true, raw: false };
  }
  return {
    path,
    method: method === 'DELETE' ? 'DELETE' : 'GET',
    ...routed,
    forwardQuery: false,
    rewrite: true,
    raw: false,
    ...(family === 'batches' && method === 'GET' ? { batchId: up.raw } : {}),
  };
}

/** `POST /v1/batches` and `POST /v1/fine_tuning/jobs`: the body read as bytes, whatever its content type. */
async function createOperation(
  c: Context<ProxyEnv>,
  base: string,
  family: 'batches' | 'fine_tuning',
  limit: number,
): Promise<Operation | ProxyError> {
  let bytes: Uint8Array | ProxyError;
  try {
    bytes = await readLimited(c.req.raw, limit);
  } catch {
    return errors.badRequest('request payload is invalid: failed to read request body');
  }
  if (bytes instanceof ProxyError) return bytes;
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (e) {
    return errors.badRequest(`request payload is invalid: invalid JSON body: ${e instanceof Error ? e.message : e}`);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return errors.badRequest('request payload is invalid: invalid JSON body: expected an object');
  }
  const fields = { ...(body as Record<string, unknown>) };
  const fileField = CREATE_FILE_FIELD[family];
  const file = fields[fileField];
  if (typeof file !== 'string' || file === '') {
    return errors.badRequest(`request payload is invalid: \`${fileField}\` is required`);
  }
  const routed = decodeRoutedId(file);
  if (routed) fields[fileField] = routed.raw;
  let routedModel = routed?.model;
  if (family === 'batches') {
    // A batch names no model upstream: `model` is a routing hint here; fine-tuning's is the base model to tune.
    if (routedModel === undefined && typeof fields.model === 'string' && fields.model.trim() !== '') {
      routedModel = fields.model.trim();
    }
    delete fields.model;
  } else if (typeof fields.validation_file === 'string') {
    const v = decodeRoutedId(fields.validation_file);
    if (v) fields.validation_file = v.raw;
  }
  delete fields.provider;
  return {
    path: base,
    method: 'POST',
    ...(routedModel !== undefined ? { routedModel } : {}),
    body: { bytes: new TextEncoder().encode(JSON.stringify(fields)), contentType: 'application/json' },
    forwardQuery: false,
    rewrite: true,
    raw: false,
  };
}

/** The caller's query without the gateway's routing hints (`model`, `provider`). */
function forwardableQuery(url: URL): string {
  return url.search.slice(1).split('&').filter((pair) => {
    const name = pair.split('=')[0];
    return pair !== '' && name !== 'model' && name !== 'provider';
  }).join('&');
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Record<string, unknown> : undefined;
  } catch {
    return undefined;
  }
}

/** The answer with every id it names routed through `model` (ids already routed are left alone). */
export function rewriteIds(json: Record<string, unknown>, model: string): Record<string, unknown> {
  const out = { ...json };
  const route = (v: unknown) => typeof v === 'string' && v !== '' && !decodeRoutedId(v) ? encodeRoutedId(v, model) : v;
  for (const f of ID_FIELDS) if (f in out) out[f] = route(out[f]);
  if (Array.isArray(out.result_files)) out.result_files = out.result_files.map(route);
  return out;
}

/** The scrubber of one call: the snapshot's and config.yaml's secrets, and the caller's own token. */
export function scrubFor(req: ProxyRequest, d: Pick<JobsDeps, 'configSecrets'>): Scrub {
  return scrubberFor(req.caller.snapshot, d.configSecrets ?? [], bearerToken(req.headers));
}
