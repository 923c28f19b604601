// The core, identical on every runtime: configuration, the snapshot being served, lifecycle, metrics, logs
// and the one clock. The three Hono apps (proxy, status, admin) read from one Gateway; the configuration
// sources write to it through the narrow `SourceSink` it satisfies (docs/architecture.md).
import type { Config } from './config/schema.ts';
import { Lifecycle } from './lifecycle/state.ts';
import type { ReadinessChecks } from './lifecycle/probes.ts';
import { type DeploymentLabels, deploymentLabels, GatewayMetrics } from './observability/gateway-metrics.ts';
import { createLogger, type Logger } from './observability/logger.ts';
import { MSG } from './observability/messages.ts';
import type { Counter } from './observability/metrics.ts';
import type { Listener, Platform, UpstreamFetch, UpstreamTls } from './platform.ts';
import { refuseRedirects, refuseUnsendableHeaders } from './upstream-fetch.ts';
import type { Snapshot } from './resources/snapshot.ts';
import {
  type ApplyMeta,
  ConfigFactsRecorder,
  type ConfigFactsView,
  type FailureKind,
  rfc3339,
} from './config-facts.ts';
import { BackgroundChecker } from './routing/background.ts';
import { ModelHealth } from './routing/health.ts';
import { backgroundTimers, modelCheck } from './routing/model-check.ts';
import type { RateLimiter } from './routing/rate-limit.ts';
import { createRateLimiter } from './routing/rate-limit-setup.ts';
import { type CacheSetup, createResponseCache } from './cache/setup.ts';
import { createResponsesStore, type ResponsesStoreSetup } from './responses/store.ts';
import { type BudgetsSetup, createBudgets } from './budgets/setup.ts';
import { RoutingState } from './routing/strategies.ts';
import { type Clock, systemClock } from './util/clock.ts';
import { createTelemetry, resourceExporter } from './telemetry/setup.ts';
import type { Telemetry } from './telemetry/telemetry.ts';
import { postBytesThroughFetch } from './usage/datadog.ts';
import { usageMetricsFor } from './usage/metrics.ts';
import { UsageSinks } from './usage/sinks.ts';

export type { ApplyMeta };

export interface GatewayOptions {
  /**
   * Run background model checks (default true). A runtime whose timers and I/O do not outlive a request
   * (Workers) turns them off; models then never read `unhealthy`, cooldowns still work.
   */
  backgroundChecks?: boolean;
  /** The gateway's one clock (default the system's): lifecycle, logs, config facts, health, rate limits. */
  clock?: Clock;
  /** The lifecycle to move through (default a new one on `clock`, in `starting`). */
  lifecycle?: Lifecycle;
  /** `upstream.tls` with its files read (src/boot.ts); absent: the runtime's defaults. */
  upstreamTls?: UpstreamTls;
}

export class Gateway implements ReadinessChecks {
  readonly log: Logger;
  readonly lifecycle: Lifecycle;
  readonly metrics: GatewayMetrics;
  /** Per-model runtime health (cooldowns, background-check marks), keyed by id across reloads. */
  readonly health: ModelHealth;
  /** Round-robin weights, latency and in-flight counts per target, keyed by id across reloads. */
  readonly routingState = new RoutingState();
  /** Caller rate limits (api keys, models), per replica or shared through Redis (`ratelimit`). */
  readonly rateLimiter: RateLimiter;
  /** The response cache's stores and metrics (docs/cache.md); idle until a `cache_policies` document applies. */
  readonly cache: CacheSetup;
  /** Translated Responses answers for `previous_response_id` and `item_reference` (docs/routing.md). */
  readonly responses: ResponsesStoreSetup;
  /** Spend budgets (docs/budgets.md); off every request path while none is configured. */
  readonly budgets: BudgetsSetup;
  private readonly checker: BackgroundChecker | undefined;
  /** Whether background model checks run (`GatewayOptions.backgroundChecks`). */
  readonly backgroundChecks: boolean;
  private _snapshot: Snapshot | undefined;
  /** The one writer of the config facts (sources report what they observed through its methods). */
  readonly record: ConfigFactsRecorder;
  private _proxyListener: Listener | undefined;
  readonly upstream: UpstreamFetch;
  private applySeq = 0;
  /** The ids of the provider keys warned about for `tls.verify: false`, while they stay so. */
  private unverifiedKeys = new Set<string>();
  private cacheWriteFailures: Counter | undefined;
  /** The gateway's one clock (ms since the epoch). */
  readonly clock: Clock;
  /** The clock's instant as a Date, for callers that format one. */
  readonly now = (): Date => new Date(this.clock());
  /** Trace export (`observability_exporters`, `observability.tracing.otlp`); inactive without an exporter. */
  readonly telemetry: Telemetry;
  /** Usage-event export (`observability_exporters` of `kind: datadog`); inactive without an exporter. */
  readonly usage: UsageSinks;

  constructor(readonly config: Config, readonly platform: Platform, opts: GatewayOptions = {}) {
    const clock = opts.clock ?? systemClock;
    this.clock = clock;
    this.lifecycle = opts.lifecycle ?? new Lifecycle(clock);
    this.log = createLogger({
      level: config.observability.log_level,
      format: config.observability.log_format,
      write: platform.writeLog,
      clock,
    });
    this.record = new ConfigFactsRecorder(config.resources_file ? 'file' : 'etcd');
    this.health = new ModelHealth({ now: clock });
    this.upstream = refuseUnsendableHeaders(refuseRedirects(platform.upstream({
      connectTimeoutMs: config.upstream.connect_timeout_ms,
      maxResponseBytes: config.upstream.max_response_bytes,
      maxBufferedBytes: config.upstream.max_buffered_response_bytes,
      poolIdleTimeoutMs: config.upstream.pool_idle_timeout_secs * 1000,
      ...(opts.upstreamTls ? { tls: opts.upstreamTls } : {}),
    })));
    this.backgroundChecks = opts.backgroundChecks !== false;
    this.checker = !this.backgroundChecks ? undefined : new BackgroundChecker({
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
      buckets: config.observability.metrics.buckets,
      now: clock,
    });
    this.telemetry = createTelemetry({
      config,
      upstream: this.upstream,
      metrics: this.metrics,
      log: this.log,
      keepAlive: platform.waitUntil ? (work) => platform.waitUntil!(work) : undefined,
    });
    this.usage = new UsageSinks({
      post: postBytesThroughFetch(),
      gzip: platform.gzip,
      env: platform.env,
      metrics: usageMetricsFor(this.metrics.registry),
      log: this.log,
      keepAlive: platform.waitUntil ? (work) => platform.waitUntil!(work) : undefined,
    });
    this.rateLimiter = createRateLimiter(config, platform, this.log, {
      onRefused: (kind, layer, policyId) => this.metrics.rateLimitRejections.inc([kind, layer, policyId]),
      onStatus: (s) => this.record.rateLimitStore(s),
      now: clock,
    });
    this.metrics.watchRateLimitStore(() => this.facts.rateLimitStore);
    this.cache = createResponseCache(config, platform, this.log, this.metrics.registry, { clock });
    this.responses = createResponsesStore(config, platform, this.log, clock);
    this.budgets = createBudgets(config, platform, this.log, this.metrics.registry, clock);
    const cachePath = config.resources_file ? undefined : config.managed.snapshot_cache_path;
    if (cachePath && platform.files) {
      this.record.cacheConfigured(cachePath);
      this.cacheWriteFailures = this.metrics.registerCacheWriteFailures();
    }
  }

  /** A WARN for each provider key that turned `tls.verify` off, once while it stays so. */
  private warnUnverified(snapshot: Snapshot): void {
    const now = new Set<string>();
    for (const k of snapshot.unverifiedKeys) {
      now.add(k.id);
      if (!this.unverifiedKeys.has(k.id)) {
        this.log.warn(MSG.providerKeyTlsUnverified, { provider_key: k.display_name, provider_key_id: k.id });
      }
    }
    this.unverifiedKeys = now;
  }

  /** The snapshot cache was written (etcd mode, `managed.snapshot_cache_path`; a `CacheWriteReport`). */
  written(path: string): void {
    this.record.cacheWritten(path, rfc3339(this.now()));
  }

  /** A write of the snapshot cache failed; the cache keeps its previous content (or none). */
  writeFailed(path: string, error: string): void {
    this.record.cacheWriteFailed(path, error);
    this.cacheWriteFailures?.inc();
  }

  /** What configuration this instance observed and serves, read-only (`/status/config`, metrics, admin). */
  get facts(): ConfigFactsView {
    return this.record.view;
  }

  /** The snapshot being served; undefined until the first configuration is applied (`apply`). */
  get snapshot(): Snapshot | undefined {
    return this._snapshot;
  }

  /** The bound proxy listener (connection counts, the drain); undefined until it is bound. */
  get proxyListener(): Listener | undefined {
    return this._proxyListener;
  }

  /** The boot bound the proxy listener: once. */
  attachProxyListener(l: Listener): void {
    if (this._proxyListener) throw new Error('the proxy listener is attached already');
    this._proxyListener = l;
  }

  /** Readiness checks of `/readyz`, in the order printed. */
  checks(): [string, string | undefined][] {
    return [
      ['shutdown', this.lifecycle.draining ? 'draining' : undefined],
      ['config', this.snapshot ? undefined : 'not ready'],
    ];
  }

  /**
   * Swap in a new snapshot atomically and record the load (docs/aisix-compatibility.md "Metrics"). The source sets
   * `facts.rejected` first: the load is successful iff nothing is rejected. `apply_seq` / `applied_at` move
   * only when the applied `config_hash` changes.
   */
  apply(snapshot: Snapshot, meta: ApplyMeta): void {
    this._snapshot = snapshot;
    // What a swap does stays proportional to the state kept, not to the snapshot's size: it runs in one turn.
    this.health.retain(snapshot.models);
    this.routingState.retain(snapshot.models);
    this.checker?.update(snapshot.checkedModels);
    this.telemetry.update(snapshot.exporters.map(resourceExporter));
    this.usage.update(snapshot.usageExporters);
    this.warnUnverified(snapshot);
    const at = rfc3339(this.now());
    const prev = this.facts.applied;
    const changed = prev?.config_hash !== meta.configHash;
    if (changed) this.applySeq++;
    this.record.applied({
      ...(meta.revision !== undefined ? { applied_revision: meta.revision } : {}),
      config_hash: meta.configHash,
      apply_seq: this.applySeq,
      applied_at: changed || !prev ? at : prev.applied_at,
      resource_counts: snapshot.counts(),
    }, at);
    const rejected = this.facts.rejected;
    if (meta.counted !== false) {
      this.metrics.reloadsTotal.inc();
      const reasons = new Set(rejected.map((r) => (r.last_error_kind === 'non_json' ? 'parse' : 'validate')));
      for (const reason of reasons) this.metrics.reloadFailures.inc([reason]);
    }
  }

  /** Stop background work (model checks). Call once, after the drain; the gateway serves no more traffic. */
  stop(): void {
    this.checker?.stop();
    void this.rateLimiter.store.close?.();
    void this.cache.close();
    void this.responses.close();
    void this.budgets.close();
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
    this.record.failed(kind, error, rfc3339(this.now()));
    this.metrics.reloadsTotal.inc();
    this.metrics.reloadFailures.inc([kind]);
  }
}
