// The pipeline's body step: read and parse a JSON request body under `proxy.request_body_limit_bytes`
// (0 = no limit) and at most `MAX_JSON_DEPTH` levels deep, then check what its endpoint requires (validate.ts). A declared length over the limit is
// refused before reading; an undeclared one is counted as it streams in. As AISIX's JSON extractor does, a
// body refuses with one wording when it is not declared JSON, not valid UTF-8, not JSON or not an object
// (docs/aisix-compatibility.md "Request bodies (edge rules)").
import { errors, ProxyError } from '../http/errors.ts';
import type { Step } from './pipeline.ts';
import { discardRest } from '../http/discard.ts';
import { validateBody } from './validate.ts';
import { joinBytes } from '../util/bytes.ts';

const decoder = new TextDecoder('utf-8', { fatal: true });

/** AISIX's answer to a body that is not a JSON object, whatever the reason. */
export const INVALID_JSON = 'request payload is invalid: invalid JSON request body';

/**
 * The deepest nesting of arrays and objects a body may have, the top level counted: the deepest serde_json's
 * default recursion limit lets AISIX read. Deeper, the gateway could not re-serialise the body for the
 * upstream, so it is the caller's 400, refused before any target is tried (docs/security.md "What callers
 * cannot grow").
 */
export const MAX_JSON_DEPTH = 127;

/** Whether `v` nests arrays and objects deeper than `levels` (the top level is 1); never recurses past that. */
function deeperThan(v: unknown, levels: number): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (levels === 0) return true;
  // Only members that are themselves arrays or objects are walked: a long array of numbers costs one test each.
  if (Array.isArray(v)) {
    for (const x of v) if (typeof x === 'object' && x !== null && deeperThan(x, levels - 1)) return true;
    return false;
  }
  for (const k in v) {
    const x = (v as Record<string, unknown>)[k];
    if (typeof x === 'object' && x !== null && deeperThan(x, levels - 1)) return true;
  }
  return false;
}

/** `application/json` or `application/*+json`, parameters (charset) aside. */
function declaredJson(req: Request): boolean {
  const type = req.headers.get('content-type');
  if (type === null) return false;
  const semi = type.indexOf(';');
  const media = (semi < 0 ? type : type.slice(0, semi)).trim().toLowerCase();
  return media === 'application/json' || (media.startsWith('application/') && media.endsWith('+json'));
}

/** The body, refused (413) as soon as it is over `limit` bytes (0 = no limit): never held past it. */
export async function readLimited(req: Request, limit: number): Promise<Uint8Array<ArrayBuffer> | ProxyError> {
  const bytes = await limitedBytes(req, limit);
  return bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : bytes;
}

/** An undeclared body, counted as it streams in and refused (413) once over `limit`. */
async function readCounted(
  body: ReadableStream<Uint8Array>,
  limit: number,
): Promise<Uint8Array<ArrayBuffer> | ProxyError> {
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      void discardRest(reader);
      return errors.tooLarge(limit);
    }
    parts.push(value);
  }
  return joinBytes(parts, size);
}

/** What a body that could not be read (the caller hung up, a broken chunked encoding) is answered. */
const UNREADABLE = 'request payload is invalid: failed to read request body';

/**
 * The body's bytes under the limit: a declared one, the usual case, straight from the runtime's buffer (no view,
 * no promise of its own); a declared length over the limit refused before reading.
 */
function limitedBytes(
  req: Request,
  limit: number,
): Promise<ArrayBuffer | Uint8Array<ArrayBuffer> | ProxyError> | ProxyError {
  const declared = req.headers.get('content-length');
  if (limit > 0 && declared !== null && Number(declared) > limit) return errors.tooLarge(limit);
  return limit === 0 || declared !== null || !req.body ? req.arrayBuffer() : readCounted(req.body, limit);
}

/** The body as a JSON object, or the caller's 400 (413 over the limit). */
export async function readJsonObject(req: Request, limit: number): Promise<Record<string, unknown> | ProxyError> {
  let bytes: ArrayBuffer | Uint8Array | ProxyError;
  try {
    bytes = await limitedBytes(req, limit);
  } catch {
    return errors.badRequest(UNREADABLE);
  }
  return bytes instanceof ProxyError ? bytes : jsonObjectOf(req, bytes);
}

/** The read body's JSON object, or the caller's 400 in AISIX's words. */
function jsonObjectOf(req: Request, bytes: ArrayBuffer | Uint8Array): Record<string, unknown> | ProxyError {
  if (!declaredJson(req)) return errors.badRequest(INVALID_JSON);
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(bytes)); // invalid UTF-8 throws here too
  } catch {
    return errors.badRequest(INVALID_JSON);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return errors.badRequest(INVALID_JSON);
  if (deeperThan(value, MAX_JSON_DEPTH)) {
    return errors.badRequest(`${INVALID_JSON}: nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`);
  }
  return value as Record<string, unknown>;
}

/** The JSON body step: read, parse and check in one async function, awaiting only the body's bytes. */
export function readBodyStep(limit: number): Step {
  return {
    name: 'read body',
    async run(call) {
      const req = call.c.req.raw;
      let bytes: ArrayBuffer | Uint8Array | ProxyError;
      try {
        bytes = await limitedBytes(req, limit);
      } catch {
        return errors.badRequest(UNREADABLE);
      }
      const body = bytes instanceof ProxyError ? bytes : jsonObjectOf(req, bytes);
      if (body instanceof ProxyError) return body;
      const invalid = validateBody(call.route.call, body);
      if (invalid) return errors.badRequest(invalid);
      call.body = body;
      return undefined;
    },
  };
}
