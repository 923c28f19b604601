// The listener refuses a request over `proxy.max_request_headers` / `proxy.max_request_header_bytes` with 431
// before Hono sees it (runtimes/node-listener.ts), so it reaches neither the access log nor the request
// families. It is accounted here instead: `sluice_request_header_limit_rejections_total{reason}` for every one,
// and a WARN at most once a second (a header flood must not become a log flood) that says how many were
// refused since the last line. AISIX's HTTP server refuses oversize headers itself and logs nothing.
import { envelopeFor, ProxyError } from '../http/errors.ts';
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import type { Logger } from '../observability/logger.ts';
import { MSG } from '../observability/messages.ts';
import type { Clock } from '../util/clock.ts';
import { wireOf } from './routes.ts';

const WARN_EVERY_MS = 1000;

/** `refuse(path, message, peer)` for `ListenSpec.headerLimits`: the 431 body, counted and logged. */
export function headerLimitRefusal(d: {
  readonly metrics: Pick<GatewayMetrics, 'headerLimitRejections'>;
  readonly log: Logger;
  readonly clock: Clock;
}): (path: string, message: string, peer?: string) => string {
  let lastWarnAt = -Infinity;
  let unlogged = 0;
  return (path, message, peer) => {
    const reason = message.startsWith('too many') ? 'fields' : 'bytes';
    d.metrics.headerLimitRejections.inc([reason]);
    unlogged++;
    const now = d.clock();
    if (now - lastWarnAt >= WARN_EVERY_MS) {
      lastWarnAt = now;
      d.log.warn(MSG.headerLimitRefused, { path, reason, detail: message, peer, refused_since_last_line: unlogged });
      unlogged = 0;
    }
    return envelopeFor(wireOf(path))(new ProxyError(431, 'invalid_request_error', message));
  };
}
