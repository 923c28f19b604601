// The gateway's tracing (docs/operations.md "Tracing"): the exporters configured (`observability_exporters`
// of `kind: otlp_http`, and `observability.tracing.otlp` as the exporter `config`), the per-request
// decision, and the hand-off of a finished request's spans to each exporter that keeps it. With no enabled
// exporter `active` is false and the request path creates nothing.
import type { UpstreamFetch, UpstreamResponse } from '../platform.ts';
import { UpstreamRedirected } from '../upstream-fetch.ts';
import { toAbortSignal } from '../util/cancel.ts';
import { parseTraceparent } from './context.ts';
import { type ExporterDeps, OtlpExporter, type PostFn } from './exporter.ts';
import { randomSalt, sampled } from './sampling.ts';
import { buildSpans, spanCountOf } from './spans.ts';
import { type RequestOutcome, RequestTrace, systemTraceClock, type TraceClock } from './trace.ts';

/** One exporter as configured (the resource's members, defaults applied). */
export interface ExporterConfig {
  name: string;
  endpoint: string;
  headers: Record<string, string>;
  sample_rate: number;
  content_mode: 'metadata_only' | 'full';
  content_max_bytes: number;
  enabled: boolean;
}

/** The name of the exporter `observability.tracing.otlp` configures. */
export const CONFIG_EXPORTER = 'config';

interface Live {
  config: ExporterConfig;
  fingerprint: string;
  exporter: OtlpExporter;
}

/**
 * A `PostFn` over the platform's upstream client (every runtime has one). A redirect, which the client
 * refuses to follow, is the collector's answer: a status that is not retried.
 */
export function postThrough(upstream: UpstreamFetch): PostFn {
  return async (url, headers, body, signal) => {
    let r: UpstreamResponse;
    try {
      r = await upstream({ url, method: 'POST', headers, body, signal });
    } catch (e) {
      if (e instanceof UpstreamRedirected) return e.status;
      throw e;
    }
    await r.discard();
    return r.status;
  };
}

/** A `PostFn` over a web `fetch`. */
export function postThroughFetch(f: typeof fetch = fetch): PostFn {
  return async (url, headers, body, signal) => {
    const r = await f(url, { method: 'POST', headers, body, signal: toAbortSignal(signal), redirect: 'manual' });
    await r.body?.cancel();
    return r.status;
  };
}

function fingerprint(c: ExporterConfig): string {
  const headers = Object.keys(c.headers).sort().map((k) => [k, c.headers[k]]);
  return JSON.stringify([c.endpoint, headers, c.sample_rate, c.content_mode, c.content_max_bytes]);
}

export class Telemetry {
  private live = new Map<string, Live>();
  private readonly salt = randomSalt();
  /** Exporters closing after a change: the drain waits for them too. */
  private readonly closing = new Set<Promise<void>>();
  /** Whether some enabled exporter exists (read once per request). */
  active = false;

  constructor(
    private readonly deps: ExporterDeps,
    /** `observability.tracing.otlp`, always part of the set when enabled. */
    private readonly fromConfig: ExporterConfig | undefined,
    private readonly clock: TraceClock = systemTraceClock,
  ) {
    this.update([]);
  }

  /**
   * The exporters of a new configuration. Pipelines are keyed by name (AISIX's): an unchanged one keeps
   * running; a changed one is rebuilt and takes over the old one's queue; a removed or disabled one
   * delivers what it holds, then stops.
   */
  update(exporters: readonly ExporterConfig[]): void {
    const wanted = new Map<string, ExporterConfig>();
    if (this.fromConfig?.enabled) wanted.set(this.fromConfig.name, this.fromConfig);
    for (const e of exporters) if (e.enabled && !wanted.has(e.name)) wanted.set(e.name, e);
    const next = new Map<string, Live>();
    for (const [name, config] of wanted) {
      const fp = fingerprint(config);
      const old = this.live.get(name);
      if (old && old.fingerprint === fp) {
        next.set(name, { ...old, config });
        continue;
      }
      const exporter = new OtlpExporter({ name, endpoint: config.endpoint, headers: config.headers }, this.deps);
      if (old) exporter.adopt(old.exporter.handOver());
      next.set(name, { config, fingerprint: fp, exporter });
    }
    for (const [name, old] of this.live) {
      if (!next.has(name)) this.retire(old.exporter.close(POST_DRAIN_MS));
      else if (next.get(name)!.exporter !== old.exporter) this.retire(old.exporter.close(POST_DRAIN_MS));
    }
    this.live = next;
    this.active = next.size > 0;
  }

  private retire(p: Promise<void>): void {
    this.closing.add(p);
    void p.finally(() => this.closing.delete(p));
  }

  /**
   * At a request's arrival: its trace when at least one exporter keeps it, else undefined (nothing more is
   * recorded for it). An inbound `traceparent` continues the caller's trace.
   */
  begin(requestId: string, headers: Headers): RequestTrace | undefined {
    if (!this.active) return undefined;
    const remote = parseTraceparent(headers.get('traceparent'), headers.get('tracestate'));
    const parentSampled = remote ? (remote.flags & 1) === 1 : undefined;
    const keep: string[] = [];
    for (const [name, l] of this.live) {
      if (sampled(l.config.sample_rate, this.salt, requestId, parentSampled)) keep.push(name);
    }
    return keep.length === 0 ? undefined : new RequestTrace(requestId, remote, keep, this.clock);
  }

  /** The largest `content_max_bytes` of the trace's exporters with `content_mode: full`; undefined = no capture. */
  captureBytes(trace: RequestTrace): number | undefined {
    let max: number | undefined;
    for (const name of trace.exporters) {
      const c = this.live.get(name)?.config;
      if (c?.content_mode === 'full') max = Math.max(max ?? 0, c.content_max_bytes);
    }
    return max;
  }

  /** The request's last byte is out: its spans go to each exporter that keeps it (never waits). */
  end(trace: RequestTrace, outcome: RequestOutcome): void {
    trace.finish();
    for (const name of trace.exporters) {
      const l = this.live.get(name);
      if (!l) continue; // removed since the request arrived
      const full = l.config.content_mode === 'full';
      l.exporter.offerBuilt(spanCountOf(trace, outcome), () =>
        buildSpans(trace, outcome, {
          exporterName: name,
          contentMaxBytes: full ? l.config.content_max_bytes : undefined,
        }));
    }
  }

  /** Records queued per exporter (the status surfaces, tests). */
  queued(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [name, l] of this.live) out[name] = l.exporter.queued;
    return out;
  }

  /** Deliver what is queued now (Workers: the promise goes to `waitUntil`). */
  async flush(): Promise<void> {
    await Promise.all([...this.live.values()].map((l) => l.exporter.flush()));
  }

  /** The drain: deliver everything within `deadlineMs`, drop (counted) what is left, accept no more. */
  async close(deadlineMs: number): Promise<void> {
    const all = [...this.live.values()].map((l) => l.exporter.close(deadlineMs));
    this.live = new Map();
    this.active = false;
    await Promise.all([...all, ...this.closing]);
  }
}

/** How long a retired exporter (removed or rebuilt) may keep delivering what it held. */
const POST_DRAIN_MS = 30_000;
