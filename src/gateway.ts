// The core, identical on every runtime: configuration, the snapshot being served, lifecycle, metrics and
// logs. The three Hono apps (proxy, status, admin) read from one Gateway; sources write to it.
import type { Config } from './config/schema.ts';
import { Lifecycle } from './lifecycle/state.ts';
import type { ReadinessChecks } from './lifecycle/probes.ts';
import { GatewayMetrics } from './observability/gateway-metrics.ts';
import { createLogger, type Logger } from './observability/logger.ts';
import type { Listener, Platform, UpstreamFetch } from './platform.ts';
import type { Snapshot } from './resources/snapshot.ts';
import type { ConfigFacts, FailureKind } from './status/config-status.ts';
import { ModelRuntime } from './routing/runtime.ts';

export interface ApplyMeta {
  configHash: string;
  revision?: number;
}

export class Gateway implements ReadinessChecks {
  readonly log: Logger;
  readonly lifecycle = new Lifecycle();
  readonly metrics: GatewayMetrics;
  readonly models: ModelRuntime;
  /** The snapshot being served; undefined until the first configuration is applied. */
  snapshot: Snapshot | undefined;
  readonly facts: ConfigFacts;
  proxyListener: Listener | undefined;
  readonly upstream: UpstreamFetch;
  private applySeq = 0;

  constructor(readonly config: Config, readonly platform: Platform, readonly now: () => Date = () => new Date()) {
    this.log = createLogger({ level: config.observability.log_level, format: config.observability.log_format, write: platform.writeLog, now });
    this.facts = {
      sourceType: config.resources_file ? 'file' : 'etcd',
      latestLoadFailed: false,
      lastFailure: null,
      rejected: [],
      partiallyCompatible: [],
    };
    this.models = new ModelRuntime(now);
    this.upstream = platform.upstream({ connectTimeoutMs: config.upstream.connect_timeout_ms });
    this.metrics = new GatewayMetrics({
      facts: () => this.facts,
      inFlight: () => this.lifecycle.inFlight,
      openConnections: () => this.proxyListener?.openConnections(),
      draining: () => this.lifecycle.draining,
      deploymentStates: () => (this.snapshot ? this.models.deploymentStates(this.snapshot) : []),
    });
  }

  /** Readiness checks of `/readyz`, in the order printed. */
  checks(): [string, string | undefined][] {
    return [
      ['shutdown', this.lifecycle.draining ? 'draining' : undefined],
      ['config', this.snapshot ? undefined : 'not ready'],
    ];
  }

  /** Swap in a new snapshot atomically and record the apply. */
  apply(snapshot: Snapshot, meta: ApplyMeta): void {
    this.snapshot = snapshot;
    this.models.retain(snapshot);
    const at = this.now().toISOString();
    this.applySeq++;
    this.facts.applied = {
      ...(meta.revision !== undefined ? { applied_revision: meta.revision } : {}),
      config_hash: meta.configHash,
      apply_seq: this.applySeq,
      applied_at: at,
      resource_counts: snapshot.counts(),
    };
    this.facts.lastReload = { successful: true, at };
    this.metrics.reloadsTotal.inc();
  }

  /** Record a failed load or fetch; the served snapshot is untouched. `last_failure` is sticky. */
  recordFailure(kind: FailureKind, error: string): void {
    const at = this.now().toISOString();
    this.facts.lastReload = { successful: false, at };
    this.facts.lastFailure = { at, last_error_kind: kind, last_error: error };
    this.metrics.reloadsTotal.inc();
    this.metrics.reloadFailures.inc([kind]);
  }
}
