// AWS's binary event-stream framing (`application/vnd.amazon.eventstream`), which Bedrock's ConverseStream
// answers in: each message is `[total u32][headers length u32][prelude CRC-32][headers][payload][message
// CRC-32]`, big-endian, CRC-32 as zlib's. Frames arrive split anywhere across network chunks.
import { concatBytes } from '../../util/bytes.ts';

export type HeaderValue = string | number | boolean | bigint | Uint8Array;

export interface EventMessage {
  headers: Record<string, HeaderValue>;
  payload: Uint8Array;
}

/** A frame that cannot be read: a CRC mismatch, an impossible length, an unknown header type, a cut stream. */
export class EventStreamError extends Error {
  override readonly name = 'EventStreamError';
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (IEEE 802.3, as zlib) of `bytes`. */
export function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

const PRELUDE = 12;
/** AWS caps one message at 16 MiB; a larger length is a corrupt prelude, not a message to wait for. */
const MAX_MESSAGE = 16 * 1024 * 1024;
const utf8 = new TextDecoder();

/** Messages as they complete, whatever the chunking; throws `EventStreamError` on a corrupt or cut frame. */
export async function* decodeEventStream(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<EventMessage> {
  let buf: Uint8Array = new Uint8Array(0);
  for await (const chunk of chunks) {
    buf = buf.length === 0 ? chunk : concatBytes(buf, chunk);
    let off = 0;
    while (buf.length - off >= PRELUDE) {
      const view = new DataView(buf.buffer, buf.byteOffset + off, PRELUDE);
      const total = view.getUint32(0);
      if (total < PRELUDE + 4 || total > MAX_MESSAGE) throw new EventStreamError('event-stream frame length invalid');
      if (buf.length - off < total) break;
      yield decodeMessage(buf.subarray(off, off + total));
      off += total;
    }
    buf = off === 0 ? buf : buf.slice(off);
  }
  if (buf.length > 0) throw new EventStreamError('event stream ended inside a frame');
}

/** One whole frame (`bytes.length` = its total length). */
export function decodeMessage(bytes: Uint8Array): EventMessage {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const total = view.getUint32(0);
  const headersLength = view.getUint32(4);
  if (view.getUint32(8) !== crc32(bytes.subarray(0, 8))) {
    throw new EventStreamError('event-stream prelude CRC mismatch');
  }
  if (view.getUint32(total - 4) !== crc32(bytes.subarray(0, total - 4))) {
    throw new EventStreamError('event-stream message CRC mismatch');
  }
  if (PRELUDE + headersLength > total - 4) throw new EventStreamError('event-stream headers overrun the frame');
  return {
    headers: decodeHeaders(bytes.subarray(PRELUDE, PRELUDE + headersLength)),
    payload: bytes.subarray(PRELUDE + headersLength, total - 4),
  };
}

function decodeHeaders(bytes: Uint8Array): Record<string, HeaderValue> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Record<string, HeaderValue> = {};
  let i = 0;
  const need = (n: number) => {
    if (i + n > bytes.length) throw new EventStreamError('event-stream header cut short');
  };
  while (i < bytes.length) {
    need(1);
    const nameLength = bytes[i++]!;
    need(nameLength + 1);
    const name = utf8.decode(bytes.subarray(i, i + nameLength));
    i += nameLength;
    const type = bytes[i++]!;
    let value: HeaderValue;
    switch (type) {
      case 0:
      case 1:
        value = type === 0;
        break;
      case 2:
        need(1);
        value = view.getInt8(i);
        i += 1;
        break;
      case 3:
        need(2);
        value = view.getInt16(i);
        i += 2;
        break;
      case 4:
        need(4);
        value = view.getInt32(i);
        i += 4;
        break;
      case 5:
      case 8:
        need(8);
        value = view.getBigInt64(i);
        i += 8;
        break;
      case 6:
      case 7: {
        need(2);
        const n = view.getUint16(i);
        i += 2;
        need(n);
        const raw = bytes.subarray(i, i + n);
        value = type === 7 ? utf8.decode(raw) : raw.slice();
        i += n;
        break;
      }
      case 9:
        need(16);
        value = bytes.slice(i, i + 16);
        i += 16;
        break;
      default:
        throw new EventStreamError(`event-stream header type ${type} unknown`);
    }
    out[name] = value;
  }
  return out;
}
