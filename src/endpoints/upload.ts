// `POST /v1/files`'s body (docs/batch-files-endpoints.md "Files"): a multipart form read within the body limit
// (src/proxy/jobs.ts), its `model` field taken out as the routing hint, `file` required, and the form written
// again for the upstream. The web `FormData` parser runs on every runtime; a streaming parser can replace
// `parseUpload` alone.
import { errors, type ProxyError } from '../http/errors.ts';

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
export async function parseUpload(own: Uint8Array<ArrayBuffer>, type: string): Promise<Upload | ProxyError> {
  let form: FormData;
  try {
    form = await new Response(own, { headers: { 'content-type': type } }).formData();
  } catch {
    return errors.badRequest(INVALID);
  }
  const file = form.get('file');
  if (!(file instanceof Blob)) {
    return errors.badRequest('request payload is invalid: multipart body must include a `file` field');
  }
  const model = form.get('model');
  const out = new FormData();
  for (const [name, value] of form) {
    if (name === 'model' || name === 'file') continue;
    out.append(name, value);
  }
  // The file goes last, as OpenAI's SDKs send it; its name and type as the caller gave them.
  const name = file instanceof File && file.name !== '' ? file.name : 'file';
  out.append('file', file, name);
  const encoded = new Response(out);
  return {
    ...(typeof model === 'string' && model.trim() !== '' ? { model: model.trim() } : {}),
    body: {
      bytes: new Uint8Array(await encoded.arrayBuffer()),
      contentType: encoded.headers.get('content-type') ?? 'multipart/form-data',
    },
  };
}
