// `POST /v1/files`'s body (docs/batch-files-endpoints.md "Files"): a multipart form read within the body limit
// (src/proxy/jobs.ts), its `model` field taken out as the routing hint, `file` required, and the form written
// again for the upstream by the gateway's own multipart reader and writer (src/media/multipart.ts,
// src/providers/form.ts), which keep every part's bytes, name and type on every runtime: the runtimes' own
// `FormData` differ where it matters (Bun's parser drops a file part's type, and its `new Response(form)` gives
// a form it parsed no boundary).
import { errors, type ProxyError } from '../http/errors.ts';
import { boundaryOf, MultipartError, MultipartParser } from '../media/multipart.ts';
import { encodeForm, type FormPart, partBytes } from '../providers/form.ts';

export interface Upload {
  readonly model?: string;
  readonly body: { bytes: Uint8Array<ArrayBuffer>; contentType: string };
}

const INVALID = 'request payload is invalid: invalid multipart form data';

/** Whether a `Content-Type` is a multipart form (checked before the body is read). */
export function isMultipart(type: string | null): boolean {
  return /^multipart\/form-data\s*;/i.test(type ?? '');
}

export const INVALID_MULTIPART = errors.badRequest(INVALID);

/** The form in `own` (the whole body, read within the limit), written again for the upstream. */
export function parseUpload(own: Uint8Array, type: string): Upload | ProxyError {
  const parts = partsOf(own, type);
  if (!parts) return errors.badRequest(INVALID);
  // The first part of a name is its value, as `FormData.get` reads it.
  const file = parts.find((p) => p.name === 'file');
  if (file?.filename === undefined) {
    return errors.badRequest('request payload is invalid: multipart body must include a `file` field');
  }
  const model = parts.find((p) => p.name === 'model');
  const hint = model && model.filename === undefined ? new TextDecoder().decode(partBytes(model)).trim() : '';
  const out: FormPart[] = parts.filter((p) => p.name !== 'model' && p.name !== 'file');
  // The file goes last, as OpenAI's SDKs send it; its name and type as the caller gave them.
  out.push({ ...file, filename: file.filename !== '' ? file.filename : 'file' });
  const { body, contentType } = encodeForm(out, {});
  return { ...(hint !== '' ? { model: hint } : {}), body: { bytes: body, contentType } };
}

/** The parts of a whole multipart body, or undefined when it is none. */
function partsOf(own: Uint8Array, type: string): FormPart[] | undefined {
  const boundary = boundaryOf(type);
  if (boundary === undefined) return undefined;
  const parser = new MultipartParser(boundary);
  try {
    parser.push(own);
    return parser.end();
  } catch (e) {
    if (e instanceof MultipartError) return undefined;
    throw e;
  }
}
