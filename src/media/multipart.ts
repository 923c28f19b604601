// A bounded, streaming `multipart/form-data` reader (docs/media-endpoints.md "Multipart bodies"): the body is
// read as it arrives and counted against `proxy.request_body_limit_bytes`, so an upload over the limit is
// refused after at most the limit's bytes, never buffered whole first. Parts keep their raw bytes (a text
// field's UTF-8 is judged on them, not on a decoder's replacement characters) and their filename and type.
import { errors, ProxyError } from '../http/errors.ts';
import type { FormPart } from '../providers/form.ts';
import { discardRest } from '../http/discard.ts';

/** AISIX's answer to a body that is not `multipart/form-data` with a boundary. */
export const INVALID_MULTIPART = 'request payload is invalid: invalid multipart form data';

/** The longest header block of one part. */
const MAX_PART_HEADERS = 16_384;
/** The most parts one form may have (each costs a record, whatever its size). */
export const MAX_PARTS = 1_000;

const encoder = new TextEncoder();
const headerDecoder = new TextDecoder();
const CRLFCRLF = encoder.encode('\r\n\r\n');
const EMPTY = new Uint8Array(0);

/** A body that breaks the multipart grammar: the caller's 400. */
export class MultipartError extends Error {}

/** The boundary of a `multipart/form-data` content type, or undefined for any other type. Pure. */
export function boundaryOf(contentType: string | null): string | undefined {
  if (contentType === null) return undefined;
  const semi = contentType.indexOf(';');
  if (semi < 0 || contentType.slice(0, semi).trim().toLowerCase() !== 'multipart/form-data') return undefined;
  for (const [k, v] of params(contentType.slice(semi))) {
    if (k === 'boundary') return v.length >= 1 && v.length <= 70 ? v : undefined;
  }
  return undefined;
}

/** `; k=v` parameters of a header value, names lower-cased, quoted values unescaped. */
function params(s: string): [string, string][] {
  const out: [string, string][] = [];
  for (const m of s.matchAll(/;\s*([^=\s;]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)/g)) {
    const raw = m[2]!.trim();
    const value = raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw;
    out.push([m[1]!.toLowerCase(), value]);
  }
  return out;
}

/** Where `needle` starts in `hay` at or after `from`, or -1. */
function indexOf(hay: Uint8Array, needle: Uint8Array, from: number): number {
  const first = needle[0]!;
  const last = hay.length - needle.length;
  for (let i = hay.indexOf(first, from); i !== -1 && i <= last; i = hay.indexOf(first, i + 1)) {
    let k = 1;
    while (k < needle.length && hay[i + k] === needle[k]) k++;
    if (k === needle.length) return i;
  }
  return -1;
}

interface OpenPart {
  name: string;
  filename?: string;
  contentType?: string;
  chunks: Uint8Array[];
  size: number;
}

/**
 * The multipart grammar over chunks as they come: `push` each, then `end`. What is held between chunks is the
 * parts read so far and fewer bytes than one delimiter (or one part's headers).
 */
export class MultipartParser {
  readonly parts: FormPart[] = [];
  /** `\r\n--boundary`; the first boundary is matched after a virtual CRLF. */
  private readonly delimiter: Uint8Array;
  private buf: Uint8Array = encoder.encode('\r\n');
  private state: 'preamble' | 'boundary' | 'headers' | 'body' | 'done' = 'preamble';
  private part: OpenPart | undefined;

  constructor(boundary: string) {
    this.delimiter = encoder.encode(`\r\n--${boundary}`);
  }

  push(chunk: Uint8Array): void {
    if (this.state === 'done') return; // the epilogue is ignored
    if (this.buf.length === 0) this.buf = chunk;
    else {
      const joined = new Uint8Array(this.buf.length + chunk.length);
      joined.set(this.buf);
      joined.set(chunk, this.buf.length);
      this.buf = joined;
    }
    this.run();
  }

  /** The parts, once the closing boundary was read; throws when the body ended before it. */
  end(): FormPart[] {
    if (this.state !== 'done') throw new MultipartError('the body ended before the closing boundary');
    return this.parts;
  }

  private run(): void {
    const d = this.delimiter;
    for (;;) {
      const buf = this.buf;
      if (this.state === 'preamble' || this.state === 'body') {
        const i = indexOf(buf, d, 0);
        if (i < 0) {
          // Keep what could be the start of a delimiter; the rest is preamble (dropped) or the part's bytes.
          const keep = Math.min(buf.length, d.length - 1);
          if (this.part && buf.length > keep) this.take(buf.subarray(0, buf.length - keep));
          this.buf = buf.subarray(buf.length - keep);
          return;
        }
        if (this.part) {
          if (i > 0) this.take(buf.subarray(0, i));
          this.parts.push(this.part);
          this.part = undefined;
        }
        this.buf = buf.subarray(i + d.length);
        this.state = 'boundary';
      } else if (this.state === 'boundary') {
        if (buf.length < 2) return;
        if (buf[0] === 45 && buf[1] === 45) { // `--`: the closing boundary
          this.state = 'done';
          this.buf = EMPTY;
          return;
        }
        let j = 0;
        while (j < buf.length && (buf[j] === 32 || buf[j] === 9)) j++; // transport padding
        if (j + 2 > buf.length) {
          if (j > 256) throw new MultipartError('a boundary line is too long');
          return;
        }
        if (buf[j] !== 13 || buf[j + 1] !== 10) throw new MultipartError('a boundary is not followed by CRLF');
        this.buf = buf.subarray(j + 2);
        this.state = 'headers';
      } else if (this.state === 'headers') {
        let end: number;
        let bodyAt: number;
        if (buf.length >= 2 && buf[0] === 13 && buf[1] === 10) [end, bodyAt] = [0, 2]; // no headers
        else {
          end = indexOf(buf, CRLFCRLF, 0);
          if (end < 0) {
            if (buf.length > MAX_PART_HEADERS) throw new MultipartError('a part has too long a header block');
            return;
          }
          bodyAt = end + 4;
        }
        if (end > MAX_PART_HEADERS) throw new MultipartError('a part has too long a header block');
        if (this.parts.length >= MAX_PARTS) throw new MultipartError(`a form may have at most ${MAX_PARTS} parts`);
        this.part = openPart(headerDecoder.decode(buf.subarray(0, end)));
        this.buf = buf.subarray(bodyAt);
        this.state = 'body';
      } else return;
    }
  }

  private take(bytes: Uint8Array): void {
    const p = this.part!;
    p.chunks.push(bytes);
    p.size += bytes.byteLength;
  }
}

/** A part from its header block: `Content-Disposition: form-data; name=…` is required. */
function openPart(headers: string): OpenPart {
  let name: string | undefined;
  let filename: string | undefined;
  let contentType: string | undefined;
  for (const line of headers.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const key = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (key === 'content-type') contentType = value;
    if (key !== 'content-disposition') continue;
    for (const [k, v] of params(value)) {
      if (k === 'name' && name === undefined) name = v;
      if (k === 'filename' && filename === undefined) filename = v;
    }
  }
  if (name === undefined) throw new MultipartError('a part has no Content-Disposition name');
  return {
    name,
    ...(filename !== undefined ? { filename } : {}),
    ...(contentType ? { contentType } : {}),
    chunks: [],
    size: 0,
  };
}

/**
 * The parts of a `multipart/form-data` request read under `limit` bytes (0 = none): 400
 * `invalid multipart form data` for another content type, 413 past the limit (the rest read and dropped), 400
 * `multipart read error: …` for a body that breaks the grammar.
 */
export async function readMultipart(req: Request, limit: number): Promise<FormPart[] | ProxyError> {
  const boundary = boundaryOf(req.headers.get('content-type'));
  if (boundary === undefined) return errors.badRequest(INVALID_MULTIPART);
  const declared = req.headers.get('content-length');
  if (limit > 0 && declared !== null && Number(declared) > limit) return errors.tooLarge(limit);
  const parser = new MultipartParser(boundary);
  const reader = req.body?.getReader();
  let size = 0;
  try {
    for (;;) {
      let r: Awaited<ReturnType<NonNullable<typeof reader>['read']>>;
      try {
        if (!reader) break;
        r = await reader.read();
      } catch {
        return errors.badRequest('request payload is invalid: failed to read request body');
      }
      if (r.done) break;
      size += r.value.byteLength;
      if (limit > 0 && size > limit) {
        void discardRest(reader!);
        return errors.tooLarge(limit);
      }
      parser.push(r.value);
    }
    return parser.end();
  } catch (e) {
    if (!(e instanceof MultipartError)) throw e;
    await reader?.cancel().catch(() => {});
    return errors.badRequest(`request payload is invalid: multipart read error: ${e.message}`);
  }
}
