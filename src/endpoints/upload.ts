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
  const parts: FormPart[] = [];
  for (const [name, value] of form) {
    if (name === 'model' || name === 'file') continue;
    parts.push({ name, value });
  }
  // The file goes last, as OpenAI's SDKs send it; its name and type as the caller gave them.
  const fileName = file instanceof File && file.name !== '' ? file.name : 'file';
  parts.push({ name: 'file', value: file, fileName });
  return {
    ...(typeof model === 'string' && model.trim() !== '' ? { model: model.trim() } : {}),
    body: await encodeMultipart(parts),
  };
}

/** One field of a form to send: text, or a file with its name. */
export interface FormPart {
  readonly name: string;
  readonly value: string | Blob;
  readonly fileName?: string;
}

/**
 * `parts` as a `multipart/form-data` body and its content type, written here rather than by `new Response(form)`:
 * Bun's answers no `Content-Type` (so no boundary) for a form it parsed itself, and the upstream then cannot
 * read the upload. Names are escaped as browsers do (`"`, CR, LF percent-encoded).
 */
export async function encodeMultipart(
  parts: readonly FormPart[],
): Promise<{ bytes: Uint8Array<ArrayBuffer>; contentType: string }> {
  const boundary = `----sluice-${randomHex(16)}`;
  const enc = new TextEncoder();
  const chunks: Uint8Array[] = [];
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${escapeName(p.name)}"`;
    if (typeof p.value === 'string') {
      chunks.push(enc.encode(`${head}\r\n\r\n`), enc.encode(p.value), enc.encode('\r\n'));
      continue;
    }
    head += `; filename="${escapeName(p.fileName ?? 'blob')}"`;
    head += `\r\nContent-Type: ${p.value.type || 'application/octet-stream'}\r\n\r\n`;
    chunks.push(enc.encode(head), new Uint8Array(await p.value.arrayBuffer()), enc.encode('\r\n'));
  }
  chunks.push(enc.encode(`--${boundary}--\r\n`));
  const bytes = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let off = 0;
  for (const c of chunks) {
    bytes.set(c, off);
    off += c.byteLength;
  }
  return { bytes, contentType: `multipart/form-data; boundary=${boundary}` };
}

function escapeName(name: string): string {
  return name.replace(/\r/g, '%0D').replace(/\n/g, '%0A').replace(/"/g, '%22');
}

function randomHex(n: number): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(n)), (b) => b.toString(16).padStart(2, '0')).join('');
}
