// `POST /v1/files`'s body (docs/batch-files-endpoints.md "Files"): a multipart form read within the body limit
// (src/proxy/jobs.ts), its `model` field taken out as the routing hint, `file` required, and the form written
// again for the upstream by src/endpoints/multipart.ts, which keeps every part's bytes, name and type on every
// runtime. A streaming parser can replace `parseUpload` alone.
import { errors, type ProxyError } from '../http/errors.ts';
import { encodeMultipart, type FormPart, parseMultipart } from './multipart.ts';

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
  const parts = parseMultipart(own, type);
  if (!parts) return errors.badRequest(INVALID);
  // The first part of a name is its value, as `FormData.get` reads it.
  const file = parts.find((p) => p.name === 'file');
  if (file?.fileName === undefined) {
    return errors.badRequest('request payload is invalid: multipart body must include a `file` field');
  }
  const model = parts.find((p) => p.name === 'model');
  const hint = model && model.fileName === undefined ? new TextDecoder().decode(model.data).trim() : '';
  const out: FormPart[] = parts.filter((p) => p.name !== 'model' && p.name !== 'file');
  // The file goes last, as OpenAI's SDKs send it; its name and type as the caller gave them.
  out.push({ ...file, fileName: file.fileName !== '' ? file.fileName : 'file' });
  return { ...(hint !== '' ? { model: hint } : {}), body: encodeMultipart(out) };
}
