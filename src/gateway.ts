// The core, identical on every runtime: configuration, the snapshot being served, lifecycle, metrics and
// logs. The three Hono apps (proxy, status, admin) read from one Gateway; sources write to it.
import type { Config } from './config/schema.ts';
import { Lifecycle } from './lifecycle/state.ts';
import type { ReadinessChecks } from './lifecycle/probes.ts';
import { type DeploymentLabels, deploymentLabels, GatewayMetrics } from './observability/gateway-metrics.ts';
import { createLogger, type Logger } from './observability/logger.ts';
import type { Listener, Platform, UpstreamFetch } from './platform.ts';
import type { Snapshot } from './resources/snapshot.ts';
import type { ConfigFacts, FailureKind } from './status/config-status.ts';
import { BackgroundChecker } from './routing/background.ts';
import { ModelHealth } from './routing/health.ts';
import { backgroundTimers, checkedModels, modelCheck } from './routing/model-check.ts';
import { RateLimiter } from './routing/rate-limit.ts';
import { RoutingState } from './routing/strategies.ts';

export interface GatewayOptions {
  /**
   * Run background model checks (default true). A runtime whose timers and I/O do not outlive a request
   * (Workers) turns them off; models then never read `unhealthy`, cooldowns still work.
   */
  backgroundChecks?: boolean;
}

export interface ApplyMeta {
  configHash: string;
  revision?: number;
}

export class Gateway implements ReadinessChecks {
  readonly log: Logger;
  readonly lifecycle = new Lifecycle();
  readonly metrics: GatewayMetrics;
  /** Per-model runtime health (cooldowns, background-check marks), keyed by id across reloads. */
  readonly health: ModelHealth;
  /** Round-robin weights, latency and in-flight counts per target, keyed by id across reloads. */
  readonly routingState = new RoutingState();
  /** Caller rate limits (api keys, models), keyed by id across reloads. */
  readonly rateLimiter = new RateLimiter();
  private readonly checker: BackgroundChecker | undefined;
  /** The snapshot being served; undefined until the first configuration is applied. */
  snapshot: Snapshot | undefined;
  readonly facts: ConfigFacts;
  proxyListener: Listener | undefined;
  readonly upstream: UpstreamFetch;
  private applySeq = 0;

  constructor(
    readonly config: Config,
    readonly platform: Platform,
    readonly now: () => Date = () => new Date(),
    opts: GatewayOptions = {},
  ) {
    this.log = createLogger({
      level: config.observability.log_level,
      format: config.observability.log_format,
      write: platform.writeLog,
      now,
    });
    this.facts = {
      sourceType: config.resources_file ? 'file' : 'etcd',
      latestLoadFailed: false,
      lastFailure: null,
      rejected: [],
      partiallyCompatible: [],
    };
    this.health = new ModelHealth({ now: () => this.now().getTime() });
    this.upstream = platform.upstream({
      connectTimeoutMs: config.upstream.connect_timeout_ms,
      maxResponseBytes: config.upstream.max_response_bytes,
    });
    this.checker = opts.backgroundChecks === false ? undefined : new BackgroundChecker({
      health: this.health,
      check: modelCheck({ snapshot: () => this.snapshot, upstream: this.upstream }),
      timers: backgroundTimers,
    });
    this.metrics = new GatewayMetrics({
      facts: () => this.facts,
      inFlight: () => this.lifecycle.inFlight,
      openConnections: () => this.proxyListener?.openConnections(),
      draining: () => this.lifecycle.draining,
      deploymentStates: () => this.deploymentStates(),
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
    const ids = snapshot.resources.models.map((m) => m.id);
    this.health.retain(ids);
    this.routingState.retain(ids);
    this.checker?.update(checkedModels(snapshot.resources.models));
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

  /** Stop background work (model checks). Call once, after the drain; the gateway serves no more traffic. */
  stop(): void {
    this.checker?.stop();
  }

  /** `aisix_deployment_state`: one row per direct model of the served snapshot. */
  private deploymentStates(): { labels: DeploymentLabels; value: number }[] {
    const s = this.snapshot;
    if (!s) return [];
    const rows: { labels: DeploymentLabels; value: number }[] = [];
    for (const m of s.resources.models) {
      if (m.kind === 'direct') {
        rows.push({
          labels: deploymentLabels(m, s.providerKeys.get(m.provider_key_id)),
          value: this.health.deploymentState(m) ?? 0,
        });
      }
    }
    return rows;
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
