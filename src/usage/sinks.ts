// The usage exporters configured (`observability_exporters` of `kind: datadog`; docs/usage-events.md "Datadog"),
// keyed by name as AISIX keys its pipelines: an unchanged one keeps running, a changed one is rebuilt and takes
// over the old one's queue, a removed or disabled one delivers what it holds and stops. With none `active` is
// false and no event is ever built.
import type { Logger } from '../observability/logger.ts';
import type { UsageExporterResource } from '../resources/schema.ts';
import { type Deliver, DeliveryQueue, type QueueDeps } from '../observability/delivery-queue.ts';
import { datadogDelivery, datadogRecord, type PostBytes } from './datadog.ts';
import { capFor, type CapturedContent } from './content.ts';
import type { UsageEvent } from './event.ts';
import type { EventDropReason, UsageMetrics } from './metrics.ts';
import { slsDelivery, slsRecord } from './sls.ts';

export interface UsageSinksDeps {
  post: PostBytes;
  /** The runtime's gzip (`Platform.gzip`); absent: `CompressionStream`. */
  gzip?: (text: string) => Promise<Uint8Array<ArrayBuffer>>;
  env: Record<string, string | undefined>;
  metrics: UsageMetrics;
  log: Logger;
  keepAlive?: (delivery: Promise<void>) => void;
  sleep?: QueueDeps['sleep'];
}

interface Live {
  row: UsageExporterResource;
  fingerprint: string;
  pipeline: DeliveryQueue<string>;
}

/** How long a retired exporter (removed or rebuilt) may keep delivering what it held. */
const RETIRED_DRAIN_MS = 30_000;

export class UsageSinks {
  private live = new Map<string, Live>();
  private readonly closing = new Set<Promise<void>>();
  private readonly pipelineDeps: QueueDeps;
  /** Whether some enabled exporter takes events (read once per request). */
  active = false;
  /** The largest `content_max_bytes` of the exporters with `content_mode: full`; undefined: no capture. */
  captureBytes: number | undefined = undefined;

  constructor(private readonly deps: UsageSinksDeps) {
    const m = deps.metrics;
    this.pipelineDeps = {
      metrics: {
        delivered: (e, n) => m.delivered.inc([e], n),
        failed: (e) => m.failures.inc([e]),
        dropped: (e, reason, n) => m.undelivered.inc([e, reason], n),
      },
      log: deps.log,
      keepAlive: deps.keepAlive,
      sleep: deps.sleep,
    };
  }

  /** The exporters of a new configuration. */
  update(rows: readonly UsageExporterResource[]): void {
    const next = new Map<string, Live>();
    for (const row of rows) {
      if (!row.enabled || next.has(row.name)) continue;
      const fingerprint = row.kind === 'aliyun_sls'
        ? JSON.stringify([row.kind, row.endpoint, row.project, row.logstore, row.credential_ref])
        : JSON.stringify([row.site, row.credential_ref, row.service, row.ddsource, row.tags]);
      const old = this.live.get(row.name);
      if (old && old.fingerprint === fingerprint) {
        next.set(row.name, { ...old, row });
        continue;
      }
      const deliver: Deliver<string> = row.kind === 'aliyun_sls'
        ? slsDelivery(row, this.deps.env, this.deps.post)
        : datadogDelivery(row, this.deps.env, this.deps.post, this.deps.gzip);
      // Usage drop reasons have no `queue_full`: what a rebuilt exporter cannot take over counts as `shutdown`.
      const pipeline = new DeliveryQueue(row.name, deliver, this.pipelineDeps, { overflow: 'shutdown' });
      if (old) pipeline.adopt(old.pipeline.handOver());
      next.set(row.name, { row, fingerprint, pipeline });
    }
    for (const [name, old] of this.live) {
      if (next.get(name)?.pipeline !== old.pipeline) this.retire(old.pipeline.close(RETIRED_DRAIN_MS));
    }
    this.live = next;
    this.active = next.size > 0;
    let max: number | undefined;
    for (const l of next.values()) {
      if (l.row.content_mode === 'full') max = Math.max(max ?? 0, l.row.content_max_bytes);
    }
    this.captureBytes = max;
  }

  /**
   * One event to every exporter, with `content` for those that capture it (each cut to its own cap); each
   * refusal's reason (a full or closed queue), in order. Never waits.
   */
  offer(event: UsageEvent, content?: CapturedContent): EventDropReason[] {
    const refused: EventDropReason[] = [];
    // Serialized once per exporter, only when its queue takes it.
    for (const l of this.live.values()) {
      const own = content && l.row.content_mode === 'full' ? content : undefined;
      const row = l.row;
      const r = l.pipeline.offer(() => {
        const capped = own && capFor(own, row.content_max_bytes);
        return row.kind === 'aliyun_sls' ? slsRecord(event, capped) : datadogRecord(event, row, capped);
      });
      if (r) refused.push(r === 'full' ? 'sink_full' : 'sink_closed');
    }
    return refused;
  }

  /** Records queued per exporter (tests, status). */
  queued(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [name, l] of this.live) out[name] = l.pipeline.queued;
    return out;
  }

  async flush(): Promise<void> {
    await Promise.all([...this.live.values()].map((l) => l.pipeline.flush()));
  }

  /** The drain: deliver everything within `deadlineMs`, drop (counted) what is left, accept no more. */
  async close(deadlineMs: number): Promise<void> {
    const all = [...this.live.values()].map((l) => l.pipeline.close(deadlineMs));
    this.live = new Map();
    this.active = false;
    await Promise.all([...all, ...this.closing]);
  }

  private retire(p: Promise<void>): void {
    this.closing.add(p);
    void p.finally(() => this.closing.delete(p));
  }
}
