// How the gateway builds its tracing from config.yaml and resources (docs/operations.md "Tracing").
import type { Config } from '../config/schema.ts';
import type { GatewayMetrics } from '../observability/gateway-metrics.ts';
import type { Logger } from '../observability/logger.ts';
import type { UpstreamFetch } from '../platform.ts';
import type { OtlpExporterResource } from '../resources/schema.ts';
import { CONFIG_EXPORTER, type ExporterConfig, postThrough, Telemetry } from './telemetry.ts';

/** `observability.tracing.otlp` as an exporter (metadata only: the config file has no content knobs). */
export function configExporter(config: Config): ExporterConfig | undefined {
  const o = config.observability.tracing.otlp;
  if (!o.enabled || !o.endpoint) return undefined;
  return {
    name: CONFIG_EXPORTER,
    endpoint: o.endpoint,
    headers: o.headers,
    sample_rate: o.sample_ratio,
    content_mode: 'metadata_only',
    content_max_bytes: 1,
    enabled: true,
  };
}

/** A served `observability_exporters` row as an exporter. */
export function resourceExporter(r: OtlpExporterResource): ExporterConfig {
  return {
    name: r.name,
    endpoint: r.endpoint,
    headers: r.headers,
    sample_rate: r.sample_rate,
    content_mode: r.content_mode,
    content_max_bytes: r.content_max_bytes,
    enabled: r.enabled,
  };
}

export function createTelemetry(deps: {
  config: Config;
  upstream: UpstreamFetch;
  metrics: GatewayMetrics;
  log: Logger;
  keepAlive?: (p: Promise<void>) => void;
}): Telemetry {
  const m = deps.metrics;
  return new Telemetry({
    post: postThrough(deps.upstream),
    metrics: {
      dropped: (e, reason, n) => m.otlpDrops.inc([e, reason], n),
      failed: (e) => m.otlpFailures.inc([e]),
      delivered: (e, n) => m.otlpDelivered.inc([e], n),
    },
    log: deps.log,
    keepAlive: deps.keepAlive,
  }, configExporter(deps.config));
}
