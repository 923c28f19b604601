// A request whose declared length (`Content-Length`) is over `proxy.request_body_limit_bytes` (0 = off) is
// refused with 413 before authentication, as AISIX's body-limit middleware does (docs/aisix-compatibility.md
// "Logs".5): the body drained first within bounds so a caller still sending it can read the answer, one
// diagnostic line, one sample of the rejection family. A body without a declared length is counted as it is
// read, after authentication (body.ts). What the connection does after the answer: docs/security.md "Safe
// defaults: bodies and connections".
import { envelopeFor, errorResponse, errors } from '../http/errors.ts';
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import type { Logger } from '../observability/logger.ts';
import type { Clock } from '../util/clock.ts';
import { DISCARD_IDLE_MS, DISCARD_MAX_MS, discardRest } from '../http/discard.ts';
import type { RequestRecord } from './record.ts';

export const BODY_LIMIT_TARGET = 'aisix::body_limit';
/**
 * The drain's bounds. Past the cap the answer goes out while the rest is read and dropped (src/http/discard.ts);
 * past the time (a caller that stalled) the answer goes out and closes the connection.
 */
export const DRAIN_CAP_BYTES = 32 * 1024 * 1024;
export const DRAIN_TIMEOUT_MS = 5000;
/** An undrained refusal logs a WARN at most this often per outcome (a drained one: INFO every time). */
const WARN_EVERY_MS = 1000;

export type DrainOutcome = 'completed' | 'cap_reached' | 'timeout' | 'client_read_error';

/** The parts of a request record this check reads and fills. */
type Rec = Pick<RequestRecord, 'requestId' | 'endpoint' | 'method' | 'protocol' | 'inbound' | 'failed'>;

/** What the check writes to. */
export interface BodyLimitDeps {
  readonly log: Logger;
  readonly metrics: Pick<GatewayMetrics, 'bodyLimitRejections'>;
  readonly clock: Clock;
}

/**
 * Read and discard `body` within the bounds; how it ended and how much was read. Past the cap the reader is handed
 * back as `rest`, uncancelled, for `discardRest` (src/http/discard.ts); on the other outcomes it is cancelled.
 */
export async function drain(
  body: ReadableStream<Uint8Array> | null,
  capBytes = DRAIN_CAP_BYTES,
  timeoutMs = DRAIN_TIMEOUT_MS,
): Promise<{ outcome: DrainOutcome; bytes: number; rest?: ReadableStreamDefaultReader<Uint8Array> }> {
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
      if (bytes > capBytes) return { outcome: 'cap_reached', bytes, rest: reader };
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

  constructor(
    private readonly d: BodyLimitDeps,
    private readonly limit: number,
    private readonly bounds = {
      capBytes: DRAIN_CAP_BYTES,
      timeoutMs: DRAIN_TIMEOUT_MS,
      discardIdleMs: DISCARD_IDLE_MS,
      discardMaxMs: DISCARD_MAX_MS,
    },
  ) {
    this.log = d.log.withTarget(BODY_LIMIT_TARGET);
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
    const started = this.d.clock();
    const { outcome, bytes, rest } = await drain(req.body, this.bounds.capBytes, this.bounds.timeoutMs);
    const fields = {
      request_id: rec.requestId,
      endpoint: rec.endpoint,
      method: rec.method,
      status: 413,
      declared_content_length: length,
      configured_limit_bytes: this.limit,
      drained_bytes: bytes,
      drain_outcome: outcome,
      elapsed_ms: this.d.clock() - started,
    };
    if (outcome === 'completed') this.log.info('request body exceeded the configured limit', fields);
    else {
      const now = this.d.clock();
      if (now - (this.lastWarn.get(outcome) ?? -Infinity) >= WARN_EVERY_MS) {
        this.lastWarn.set(outcome, now);
        this.log.warn('request body exceeded the configured limit and the drain did not finish', fields);
      }
    }
    this.d.metrics.bodyLimitRejections.inc([rec.endpoint, rec.inbound, outcome]);
    const e = errors.tooLarge(this.limit);
    rec.failed(e.type, e.message);
    const res = errorResponse(e, envelopeFor(rec.protocol));
    // A caller still sending past the cap has the rest read and dropped, so it reads this answer before any close;
    // one that stalled or broke its body is closed on.
    if (rest) void discardRest(rest, this.bounds.discardIdleMs, this.bounds.discardMaxMs);
    else if (outcome !== 'completed') res.headers.set('connection', 'close');
    return res;
  }
}
