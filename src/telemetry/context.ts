// W3C Trace Context (docs/operations.md "Tracing"): reading an inbound `traceparent`/`tracestate` the way
// AISIX screens them, minting ids, and writing the `traceparent` an upstream attempt carries.

/** The caller's span a request continues. */
export interface RemoteContext {
  traceId: string;
  /** The caller's span: the SERVER span's parent. */
  parentSpanId: string;
  /** The inbound trace flags (bit 0x01 sampled, 0x02 random). */
  flags: number;
  /** The caller's screened `tracestate`, when it sent a usable one. */
  traceState?: string;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);
const MAX_TRACESTATE_BYTES = 512;

/**
 * The caller's context, or undefined (the request is then a local root, never refused): exactly one
 * `traceparent` of version `00`, 55 lowercase-hex characters, non-zero ids. A `Headers` object joins
 * repeated fields with `, `, so a comma means more than one header.
 */
export function parseTraceparent(traceparent: string | null, tracestate: string | null): RemoteContext | undefined {
  if (traceparent === null || traceparent.length !== 55) return undefined;
  const m = TRACEPARENT.exec(traceparent);
  if (!m || m[1] === ZERO_TRACE || m[2] === ZERO_SPAN) return undefined;
  const ctx: RemoteContext = { traceId: m[1]!, parentSpanId: m[2]!, flags: parseInt(m[3]!, 16) };
  const state = screenTracestate(tracestate);
  if (state !== undefined) ctx.traceState = state;
  return ctx;
}

/** A `tracestate` kept verbatim when, trimmed, it is 1–512 bytes of printable ASCII; else dropped. */
export function screenTracestate(value: string | null): string | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (v.length === 0 || v.length > MAX_TRACESTATE_BYTES) return undefined;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return undefined;
  }
  return v;
}

/** The `traceparent` of a span (always sampled: only sampled requests are traced at all). */
export function formatTraceparent(traceId: string, spanId: string): string {
  return `00-${traceId}-${spanId}-01`;
}

const HEX: string[] = [];
for (let i = 0; i < 256; i++) HEX.push(i.toString(16).padStart(2, '0'));

/** `bytes` random bytes as lowercase hex, never all zero (an all-zero id is invalid). */
export function randomHexId(bytes: 8 | 16): string {
  const buf = new Uint8Array(bytes);
  for (;;) {
    crypto.getRandomValues(buf);
    let out = '';
    let any = 0;
    for (let i = 0; i < bytes; i++) {
      out += HEX[buf[i]!];
      any |= buf[i]!;
    }
    if (any !== 0) return out;
  }
}
