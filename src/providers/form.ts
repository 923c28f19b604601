// A caller's multipart form as the media endpoints relay it (docs/media-endpoints.md "Multipart bodies"): every
// part in order, its bytes as they arrived, and the one encoding sent upstream, with `model` swapped for the
// target's upstream name.

/** One part of a `multipart/form-data` body. */
export interface FormPart {
  /** The `name` of its `Content-Disposition`. */
  readonly name: string;
  /** The `filename`, when the part is a file. */
  readonly filename?: string;
  /** The part's own `Content-Type`, when it sent one. */
  readonly contentType?: string;
  /** Its bytes in the pieces they arrived in (never joined: a large file is not copied again). */
  readonly chunks: readonly Uint8Array[];
  readonly size: number;
}

const encoder = new TextEncoder();

/** A part's bytes in one array (for small text fields: `model`, `prompt`). */
export function partBytes(p: FormPart): Uint8Array {
  if (p.chunks.length === 1) return p.chunks[0]!;
  const out = new Uint8Array(p.size);
  let off = 0;
  for (const c of p.chunks) {
    out.set(c, off);
    off += c.byteLength;
  }
  return out;
}

/** A name or filename as the WHATWG form encoding quotes it: `"`, CR and LF percent-encoded. */
function quoted(s: string): string {
  return `"${s.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A')}"`;
}

/**
 * The form encoded for the upstream under a fresh boundary: every part in order, repeated names kept, each
 * part's filename and content type kept. The first text part of a name `fields` holds as a string carries that
 * string (the target's `model`, a prompt a guardrail masked); every other part its bytes as they came. One
 * buffer of the body's length: the upstream clients of every runtime send it as it is.
 */
export function encodeForm(
  parts: readonly FormPart[],
  fields: Readonly<Record<string, unknown>>,
): { body: Uint8Array<ArrayBuffer>; contentType: string } {
  const boundary = `----sluice-${crypto.randomUUID()}`;
  const pieces: Uint8Array[] = [];
  const done = new Set<string>();
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name=${quoted(p.name)}`;
    if (p.filename !== undefined) head += `; filename=${quoted(p.filename)}`;
    head += '\r\n';
    if (p.contentType !== undefined) head += `Content-Type: ${p.contentType.replace(/[\r\n]/g, '')}\r\n`;
    pieces.push(encoder.encode(`${head}\r\n`));
    const field = p.filename === undefined && !done.has(p.name) ? fields[p.name] : undefined;
    done.add(p.name);
    if (typeof field === 'string') pieces.push(encoder.encode(field));
    else pieces.push(...p.chunks);
    pieces.push(encoder.encode('\r\n'));
  }
  pieces.push(encoder.encode(`--${boundary}--\r\n`));
  let size = 0;
  for (const x of pieces) size += x.byteLength;
  const body = new Uint8Array(size);
  let off = 0;
  for (const x of pieces) {
    body.set(x, off);
    off += x.byteLength;
  }
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}
