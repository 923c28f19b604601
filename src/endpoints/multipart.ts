// A `multipart/form-data` body read and written by the gateway itself (RFC 7578), for the upload it relays
// (src/endpoints/upload.ts, docs/batch-files-endpoints.md "Files"): the runtimes' own `FormData` differ where
// it matters here — Bun's parser drops a file part's `Content-Type`, and Bun's `new Response(form)` gives a
// form it parsed no boundary — so the part's bytes, names and type cross unchanged on every runtime.

/** One part of a form: a text field (no `fileName`), or a file with its name and type. Bytes as sent. */
export interface FormPart {
  readonly name: string;
  readonly data: Uint8Array;
  readonly fileName?: string;
  readonly type?: string;
}

const enc = new TextEncoder();
const dec = new TextDecoder();
const CRLF = enc.encode('\r\n');
const HEADERS_END = enc.encode('\r\n\r\n');

/** The boundary a `Content-Type` names, or undefined (RFC 2046: 1 to 70 characters). */
export function boundaryOf(type: string): string | undefined {
  const m = /;\s*boundary\s*=\s*(?:"([^"]{1,70})"|([^;\s"]{1,70}))/i.exec(type);
  return m?.[1] ?? m?.[2];
}

/** The parts of `body`, or undefined when it is no well-formed form with that boundary. */
export function parseMultipart(body: Uint8Array, type: string): FormPart[] | undefined {
  const boundary = boundaryOf(type);
  if (boundary === undefined) return undefined;
  const dash = enc.encode(`--${boundary}`);
  const next = enc.encode(`\r\n--${boundary}`);
  let at = indexOf(body, dash, 0);
  if (at < 0 || (at > 0 && !(body[at - 2] === 13 && body[at - 1] === 10))) return undefined;
  const parts: FormPart[] = [];
  for (;;) {
    let pos = at + dash.length;
    if (body[pos] === 45 && body[pos + 1] === 45) return parts; // the closing delimiter
    while (body[pos] === 32 || body[pos] === 9) pos++; // transport padding
    if (!startsWith(body, CRLF, pos)) return undefined;
    const headersEnd = indexOf(body, HEADERS_END, pos);
    if (headersEnd < 0) return undefined;
    const part = partHeaders(dec.decode(body.subarray(pos + 2, headersEnd)));
    const start = headersEnd + HEADERS_END.length;
    const end = indexOf(body, next, start);
    if (!part || end < 0) return undefined;
    parts.push({ ...part, data: body.subarray(start, end) });
    at = end + CRLF.length;
  }
}

/** A part's name, file name and type from its header lines; undefined without a form-data disposition. */
function partHeaders(text: string): Omit<FormPart, 'data'> | undefined {
  let disposition: string | undefined;
  let type: string | undefined;
  for (const line of text === '' ? [] : text.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon < 0) return undefined;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'content-disposition') disposition = value;
    else if (name === 'content-type') type = value;
  }
  if (!disposition || !/^form-data\s*(;|$)/i.test(disposition)) return undefined;
  const params = new Map<string, string>();
  for (const m of disposition.matchAll(/;\s*([A-Za-z*]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))/g)) {
    params.set(m[1]!.toLowerCase(), m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!);
  }
  const name = params.get('name');
  if (name === undefined) return undefined;
  const fileName = params.has('filename*') ? extValue(params.get('filename*')!) : params.get('filename');
  return {
    name,
    ...(fileName !== undefined ? { fileName } : {}),
    ...(type !== undefined && type !== '' ? { type } : {}),
  };
}

/** An RFC 5987 `utf-8''…` value decoded; undefined when it is not one. */
function extValue(v: string): string | undefined {
  const m = /^utf-8''(.*)$/i.exec(v);
  if (!m) return undefined;
  try {
    return decodeURIComponent(m[1]!);
  } catch {
    return undefined;
  }
}

/** `parts` as a body and its content type. Names are escaped as browsers do (`"`, CR, LF percent-encoded). */
export function encodeMultipart(parts: readonly FormPart[]): { bytes: Uint8Array<ArrayBuffer>; contentType: string } {
  const boundary = `----sluice-${randomHex(16)}`;
  const chunks: Uint8Array[] = [];
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${escapeName(p.name)}"`;
    if (p.fileName !== undefined) {
      head += `; filename="${escapeName(p.fileName)}"\r\nContent-Type: ${p.type || 'application/octet-stream'}`;
    }
    chunks.push(enc.encode(`${head}\r\n\r\n`), p.data, CRLF);
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

function startsWith(hay: Uint8Array, needle: Uint8Array, at: number): boolean {
  if (at + needle.length > hay.length) return false;
  for (let i = 0; i < needle.length; i++) if (hay[at + i] !== needle[i]) return false;
  return true;
}

/** The first index of `needle` in `hay` at or after `from`, or -1: the native byte scan finds candidates. */
function indexOf(hay: Uint8Array, needle: Uint8Array, from: number): number {
  for (let i = hay.indexOf(needle[0]!, from); i >= 0; i = hay.indexOf(needle[0]!, i + 1)) {
    if (startsWith(hay, needle, i)) return i;
  }
  return -1;
}
