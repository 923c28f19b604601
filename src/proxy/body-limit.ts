// A request whose declared length (`Content-Length`) is over `proxy.request_body_limit_bytes` (0 = off) is
// refused with 413 before authentication, as AISIX's body-limit middleware does (docs/aisix-compatibility.md "Logs".5).
// The body is drained first — at most 32 MiB, for at most 5 s — so a caller still sending it can read the
// answer; when the drain does not finish, the answer closes the connection. One diagnostic line per refusal
// (INFO when drained; WARN, at most once a second per outcome, when not) and
// `aisix_proxy_request_body_limit_rejections_total{endpoint,inbound_protocol,outcome}` (never rate-limited).
// A body without a declared length is counted as it is read, after authentication (body.ts).
import type { Gateway } from '../gateway.ts';
import type { Logger } from '../observability/logger.ts';
import { envelopeFor, errorResponse, errors } from '../http/errors.ts';

export const BODY_LIMIT_TARGET = 'aisix::body_limit';
export const DRAIN_CAP_BYTES = 32 * 1024 * 1024;
export const DRAIN_TIMEOUT_MS = 5000;
const WARN_EVERY_MS = 1000;

export type DrainOutcome = 'completed' | 'cap_reached' | 'timeout' | 'client_read_error';

/** The parts of a request record this check reads and fills. */
interface Rec {
  requestId: string;
  endpoint: string;
  method: string;
  protocol: 'openai' | 'anthropic';
  errorKind?: string;
  error?: string;
}

/** Read and discard `body` within the bounds; how it ended and how much was read. */
export async function drain(
  body: ReadableStream<Uint8Array> | null,
  capBytes = DRAIN_CAP_BYTES,
  timeoutMs = DRAIN_TIMEOUT_MS,
): Promise<{ outcome: DrainOutcome; bytes: number }> {
  if (!body) return { outcome: 'completed', bytes: 0 };
  const reader = body.getReader();
  let bytes = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    for (;;) {
      const r = await Promise.race([reader.read(), expired]);
      if (r === 'timeout') {
        void reader.cancel().catch(() => {});
        return { outcome: 'timeout', bytes };
      }
      if (r.done) return { outcome: 'completed', bytes };
      bytes += r.value.byteLength;
      if (bytes > capBytes) {
        void reader.cancel().catch(() => {});
        return { outcome: 'cap_reached', bytes };
      }
    }
  } catch {
    return { outcome: 'client_read_error', bytes };
  } finally {
    clearTimeout(timer);
  }
}

export class BodyLimit {
  private readonly log: Logger;
  private readonly lastWarn = new Map<DrainOutcome, number>();

  constructor(private readonly gw: Gateway, private readonly limit: number) {
    this.log = gw.log.withTarget(BODY_LIMIT_TARGET);
  }

  /** The declared length when it is over the limit (the request must be refused), else undefined. */
  over(req: Request): number | undefined {
    if (this.limit <= 0) return undefined;
    const declared = req.headers.get('content-length');
    if (declared === null) return undefined;
    const length = Number(declared);
    return length > this.limit ? length : undefined;
  }

  /** The 413 for a declared length over the limit, once the body is drained (see `over`). */
  async refuse(req: Request, rec: Rec, length: number): Promise<Response> {
    const started = Date.now();
    const { outcome, bytes } = await drain(req.body);
    const fields = {
      request_id: rec.requestId,
      endpoint: rec.endpoint,
      method: rec.method,
      status: 413,
      declared_content_length: length,
      configured_limit_bytes: this.limit,
      drained_bytes: bytes,
      drain_outcome: outcome,
      elapsed_ms: Date.now() - started,
    };
    if (outcome === 'completed') this.log.info('request body exceeded the configured limit', fields);
    else {
      const now = Date.now();
      if (now - (this.lastWarn.get(outcome) ?? -Infinity) >= WARN_EVERY_MS) {
        this.lastWarn.set(outcome, now);
        this.log.warn('request body exceeded the configured limit and the drain did not finish', fields);
      }
    }
    this.gw.metrics.bodyLimitRejections.inc([rec.endpoint, rec.protocol, outcome]);
    const e = errors.tooLarge(this.limit);
    rec.errorKind = e.type;
    rec.error = e.message;
    const res = errorResponse(e, envelopeFor(rec.protocol));
    // Unread bytes may still be on the wire: the connection cannot carry another request.
    if (outcome !== 'completed') res.headers.set('connection', 'close');
    return res;
  }
}
