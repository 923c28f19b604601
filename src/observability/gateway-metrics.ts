// Every metric family the gateway exposes (docs/aisix-compatibility.md "Metrics"), declared in one place. Gauges that mirror state
// (config status, in-flight, connections) are computed at scrape time from the one source of truth.
import type { DirectModel, ProviderKey } from '../resources/schema.ts';
import type { ConfigFactsView } from '../config-facts.ts';
import { DEFAULT_BUCKETS } from '../config/schema.ts';
import { bucketQuantile, Counter, Gauge, Histogram, Registry, Summary } from './metrics.ts';
import { RequestSeries } from './request-series.ts';

/** Labels of every `aisix_deployment_*` series, in declaration order. */
export type DeploymentLabels = [provider: string, model: string, upstream_model: string, provider_key_id: string];
/** The names of `DeploymentLabels`. */
export const DEPLOYMENT_LABELS = ['provider', 'model', 'upstream_model', 'provider_key_id'] as const;

/**
 * The deployment labels of a direct model. `upstream_model` is the configured `model_name` — for a
 * wildcard alias its pattern, never the caller's name — so callers cannot grow the label set.
 */
export function deploymentLabels(model: DirectModel, key: ProviderKey | undefined): DeploymentLabels {
  return [model.provider ?? key?.provider ?? '', model.display_name, model.model_name, model.provider_key_id];
}

/**
 * `aisix_proxy_requests_total` / `aisix_proxy_failed_requests_total` / `aisix_llm_requests_total` labels, in
 * AISIX's order. Missing identity values are the string `unknown`; `endpoint` is the route path, `other` when unknown.
 */
export const REQUEST_LABELS = [
  'endpoint',
  'inbound_protocol',
  'provider',
  'model',
  'upstream_model',
  'provider_key_id',
  'provider_key_name',
  'api_key_id',
  'team_id',
  'user_id',
  'user_name',
  'stream',
  'is_fallback',
  'status',
  'outcome',
] as const;
/** The duration families: the request labels without `is_fallback`. */
export const DURATION_LABELS = REQUEST_LABELS.filter((l) => l !== 'is_fallback');
/** The token families: the request labels up to `user_name`. */
export const TOKEN_LABELS = REQUEST_LABELS.slice(0, REQUEST_LABELS.indexOf('stream'));
/**
 * The SLO histograms' labels (`aisix_request_e2e_latency_seconds`, `aisix_request_ttft_seconds`): no per-key
 * label, so buckets × series stay bounded by the configuration, never by the callers.
 */
export const SLO_LABELS = ['env_id', 'endpoint', 'model', 'provider', 'status_class', 'streaming'] as const;
/** The endpoints whose requests AISIX observes in the SLO histograms (`/a2a`: every A2A call, docs/a2a.md). */
export const SLO_ENDPOINTS = new Set(['/v1/chat/completions', '/v1/messages', '/v1/responses', '/a2a']);
export const LEGACY_REQUEST_LABELS = ['provider', 'model', 'status', 'outcome'] as const;
export const LEGACY_DURATION_LABELS = ['provider', 'model', 'status'] as const;

export interface MetricsSources {
  facts(): ConfigFactsView;
  inFlight(): number;
  openConnections(): number | undefined;
  draining(): boolean;
  /** aisix_deployment_state rows; filled in by model health. */
  deploymentStates?(): { labels: DeploymentLabels; value: number }[];
  /** `observability.metrics.buckets` (seconds); AISIX's defaults when absent. */
  buckets?: { request_e2e_latency: readonly number[]; request_ttft: readonly number[]; a2a_ttfb?: readonly number[] };
  /** The clock of the summaries' rolling window (ms since the epoch); default `Date.now`. */
  now?: () => number;
}

export class GatewayMetrics {
  readonly registry = new Registry();

  readonly reloadsTotal = this.counter(
    'aisix_config_reloads_total',
    'Configuration reloads: full syncs of the source, file loads and fetch failures (not watch events).',
  );
  readonly reloadFailures = this.counter(
    'aisix_config_reload_failures_total',
    'Configuration loads that failed, by reason.',
    ['reason'],
  );
  readonly deploymentRequests = this.counter(
    'aisix_deployment_requests_total',
    'Upstream attempts per model.',
    DEPLOYMENT_LABELS,
  );
  readonly deploymentSuccess = this.counter(
    'aisix_deployment_success_responses_total',
    'Successful upstream attempts per model.',
    DEPLOYMENT_LABELS,
  );
  readonly deploymentFailure = this.counter(
    'aisix_deployment_failure_responses_total',
    'Failed upstream attempts per model.',
    DEPLOYMENT_LABELS,
  );
  readonly cooledDown = this.counter(
    'aisix_deployment_cooled_down_total',
    'Times a model entered cooldown.',
    DEPLOYMENT_LABELS,
  );

  // ---- AISIX's request, LLM, token and usage families (docs/aisix-compatibility.md "Metrics") ----------------------
  // One choke point records them per proxied request (src/proxy); usage events and fallbacks per upstream
  // attempt (src/routing/dispatch.ts). Label names and their order are AISIX's.
  readonly legacyRequests = this.counter(
    'aisix_requests_total',
    'Proxied requests (legacy family).',
    LEGACY_REQUEST_LABELS,
  );
  // The duration families are summaries observed at response start (a stream: its first byte), AISIX's
  // form and timing; the whole-request figure is the e2e histogram's.
  readonly legacyDuration: Summary;
  readonly proxyRequests = this.counter('aisix_proxy_requests_total', 'Proxied requests completed.', REQUEST_LABELS);
  readonly proxyFailedRequests = this.counter(
    'aisix_proxy_failed_requests_total',
    'Proxied requests whose outcome is not success.',
    REQUEST_LABELS,
  );
  readonly proxyDuration: Summary;
  readonly llmRequests = this.counter(
    'aisix_llm_requests_total',
    'Model-inference requests completed.',
    REQUEST_LABELS,
  );
  readonly llmDuration: Summary;
  /** The serving attempt's upstream time to first token, streamed chat and messages (0 is not observed). */
  readonly llmTtft: Summary;
  readonly requestE2e: Histogram;
  readonly requestTtft: Histogram;
  readonly llmInputTokens = this.counter(
    'aisix_llm_input_tokens_total',
    'Input (prompt) tokens reported by upstreams.',
    TOKEN_LABELS,
  );
  readonly llmOutputTokens = this.counter(
    'aisix_llm_output_tokens_total',
    'Output (completion) tokens reported by upstreams.',
    TOKEN_LABELS,
  );
  readonly llmTotalTokens = this.counter(
    'aisix_llm_total_tokens_total',
    'Total tokens reported by upstreams.',
    TOKEN_LABELS,
  );
  readonly llmSpend = this.counter(
    'aisix_llm_spend_micro_usd_total',
    'Spend in micro-USD, where the model has a cost.',
    TOKEN_LABELS,
  );
  readonly tokensConsumed = this.counter(
    'aisix_tokens_consumed_total',
    'Total tokens consumed (legacy family).',
    ['provider', 'model'],
  );
  readonly usageEvents = this.counter(
    'aisix_usage_events_emitted_total',
    'Usage records emitted, one per upstream attempt.',
    ['handler', 'status_code', 'inbound_protocol', 'model', 'provider_key_id', 'provider_key_name'],
  );
  readonly successfulFallbacks = this.counter(
    'aisix_routing_successful_fallbacks_total',
    'Attempts that moved to another target and served the request.',
    ['model', 'fallback_model'],
  );
  readonly failedFallbacks = this.counter(
    'aisix_routing_failed_fallbacks_total',
    'Attempts that moved to another target and did not serve the request.',
    ['model', 'fallback_model'],
  );
  /** Kept by the proxy app: +1 when a `/v1` request arrives, -1 after its last byte (series stay at 0). */
  readonly proxyInFlight = this.registry.register(
    new Gauge(
      'aisix_proxy_in_flight_requests',
      'Requests being served on the proxy listener (a stream until its last byte).',
      ['endpoint', 'inbound_protocol'],
    ),
  );
  /** Sluice-only: requests the listener refused with 431 before routing (src/proxy/header-limit.ts). */
  readonly headerLimitRejections = this.counter(
    'sluice_request_header_limit_rejections_total',
    'Requests refused with 431 for more header fields (reason="fields") or header bytes (reason="bytes") than proxy.max_request_headers / proxy.max_request_header_bytes.',
    ['reason'],
  );
  readonly bodyLimitRejections = this.counter(
    'aisix_proxy_request_body_limit_rejections_total',
    'Requests refused with 413 for a body over proxy.request_body_limit_bytes.',
    ['endpoint', 'inbound_protocol', 'outcome'],
  );

  /** Spans an exporter did not deliver, by reason (`queue_full`, `rejected`, `retries_exhausted`, `shutdown`). */
  readonly otlpDrops = this.counter(
    'aisix_otlp_fanout_drops_total',
    'Trace spans an OTLP exporter dropped, by reason.',
    ['exporter', 'reason'],
  );
  /** Export POSTs that failed (each retry counts). */
  readonly otlpFailures = this.counter(
    'aisix_otlp_fanout_failures_total',
    'OTLP export requests that failed.',
    ['exporter'],
  );
  readonly otlpDelivered = this.counter(
    'sluice_otlp_delivered_spans_total',
    'Trace spans an OTLP exporter delivered.',
    ['exporter'],
  );

  /** The request families' series per request label set, bound once (request-series.ts). */
  readonly requestSeries: RequestSeries = new RequestSeries(this);

  /** AISIX's rate-limit refusals: `scope` requests|tokens|concurrency, `layer` api_key|model, `policy_id` "". */
  readonly rateLimitRejections = this.counter(
    'aisix_ratelimit_rejections_total',
    'Requests refused by a caller rate limit.',
    ['scope', 'layer', 'policy_id'],
  );

  /** AISIX's A2A families (docs/a2a.md "Telemetry"): `agent` is a configured agent, `operation` a closed set. */
  readonly a2aRequests = this.counter(
    'aisix_a2a_requests_total',
    'A2A calls that reached a configured agent, by status class.',
    ['agent', 'operation', 'status'],
  );
  readonly a2aStreamEvents = this.counter(
    'aisix_a2a_stream_events_total',
    'A2A stream events carrying a result, relayed to the caller.',
    ['agent', 'operation'],
  );
  readonly a2aTaskStates = this.counter(
    'aisix_a2a_task_state_total',
    'A2A calls by the last task state their answer reported.',
    ['agent', 'state'],
  );
  /** Time from an A2A call's arrival to its first result (registered in the constructor: it reads the buckets). */
  readonly a2aTtfb: Histogram;

  constructor(src: MetricsSources) {
    const r = this.registry;
    const now = src.now ?? Date.now;
    // Registered here, in the exposition order they always had, because they read the sources.
    const summary = (name: string, help: string, labels: readonly string[]) =>
      r.register(new Summary(name, help, labels, now));
    this.legacyDuration = summary(
      'aisix_request_duration_seconds',
      'Proxied request duration to response start (legacy family).',
      LEGACY_DURATION_LABELS,
    );
    this.proxyDuration = summary(
      'aisix_proxy_request_duration_seconds',
      'Proxied request duration to response start (a stream: its first byte).',
      DURATION_LABELS,
    );
    this.llmDuration = summary(
      'aisix_llm_request_duration_seconds',
      'Model-inference request duration to response start.',
      DURATION_LABELS,
    );
    this.llmTtft = summary(
      'aisix_llm_time_to_first_token_seconds',
      'Upstream time to first token of streamed model calls.',
      TOKEN_LABELS,
    );
    const buckets = src.buckets;
    this.requestE2e = r.register(
      new Histogram(
        'aisix_request_e2e_latency_seconds',
        'Request latency from arrival to the last byte (SLO histogram).',
        SLO_LABELS,
        [...(buckets?.request_e2e_latency ?? DEFAULT_BUCKETS.request_e2e_latency)],
      ),
    );
    this.requestTtft = r.register(
      new Histogram(
        'aisix_request_ttft_seconds',
        'Upstream time to first token of streamed requests (SLO histogram).',
        SLO_LABELS,
        [...(buckets?.request_ttft ?? DEFAULT_BUCKETS.request_ttft)],
      ),
    );
    this.a2aTtfb = r.register(
      new Histogram(
        'aisix_a2a_ttfb_seconds',
        'Time from an A2A call to its first result event.',
        ['agent', 'operation'],
        [...(buckets?.a2a_ttfb ?? DEFAULT_BUCKETS.a2a_ttfb)],
      ),
    );
    for (const [name, help, labels, collect] of scrapedGauges(src)) r.register(new Gauge(name, help, labels, collect));
  }

  private counter(name: string, help: string, labels: readonly string[] = []): Counter {
    return this.registry.register(new Counter(name, help, labels));
  }

  render(): string {
    return this.registry.render();
  }

  /**
   * Per model, from the SLO histograms (every status and endpoint together): requests observed and the p50
   * and p95 of request latency and of time to first token, interpolated in the buckets as
   * `histogram_quantile` does. Sorted by model name.
   */
  latencyByModel(): ModelLatency[] {
    const model = SLO_LABELS.indexOf('model');
    const sum = (h: Histogram) => {
      const out = new Map<string, { counts: Float64Array; count: number }>();
      for (const s of h.snapshot()) {
        const name = s.values[model]!;
        let m = out.get(name);
        if (!m) out.set(name, m = { counts: new Float64Array(h.buckets.length), count: 0 });
        for (let i = 0; i < s.counts.length; i++) m.counts[i]! += s.counts[i]!;
        m.count += s.count;
      }
      return out;
    };
    const e2e = sum(this.requestE2e);
    const ttft = sum(this.requestTtft);
    const q = (h: Histogram, m: { counts: Float64Array; count: number } | undefined, p: number) =>
      m && m.count > 0 ? bucketQuantile(h.buckets, withOverflow(m), p) : undefined;
    return [...new Set([...e2e.keys(), ...ttft.keys()])].sort().map((name) => ({
      model: name,
      requests: e2e.get(name)?.count ?? 0,
      latencyP50: q(this.requestE2e, e2e.get(name), 0.5),
      latencyP95: q(this.requestE2e, e2e.get(name), 0.95),
      streams: ttft.get(name)?.count ?? 0,
      ttftP50: q(this.requestTtft, ttft.get(name), 0.5),
      ttftP95: q(this.requestTtft, ttft.get(name), 0.95),
    }));
  }

  /**
   * etcd mode with `managed.snapshot_cache_path`: `sluice_snapshot_cache_write_failures_total`, 0 from the
   * start (registered only when a cache is configured).
   */
  registerCacheWriteFailures(): Counter {
    const c = this.registry.register(
      new Counter(
        'sluice_snapshot_cache_write_failures_total',
        'Writes of the snapshot cache (managed.snapshot_cache_path) that failed; the served snapshot is unaffected.',
      ),
    );
    c.inc([], 0);
    return c;
  }

  /** `sluice_ratelimit_shared_store_up`: with `ratelimit.backend: redis`, 1 while limits are shared, 0 not. */
  watchRateLimitStore(state: () => { backend: string; shared: boolean } | undefined): void {
    this.registry.register(
      new Gauge(
        'sluice_ratelimit_shared_store_up',
        'ratelimit.backend redis: 1 while rate limits are shared through Redis, 0 while counting per replica.',
        [],
        (g) => {
          g.reset();
          const s = state();
          if (s?.backend === 'redis') g.set([], s.shared ? 1 : 0);
        },
      ),
    );
  }
}

/**
 * The gauges computed at scrape time from the sources, in exposition order: name, help, labels, and how
 * each sets its series from the one source of truth.
 */
function scrapedGauges(src: MetricsSources): [string, string, readonly string[], (g: Gauge) => void][] {
  return [
    [
      'aisix_config_last_reload_successful',
      'Whether the latest configuration load succeeded (1) or failed (0).',
      [],
      (g) => {
        const lr = src.facts().lastReload;
        if (lr) g.set([], lr.successful ? 1 : 0);
      },
    ],
    [
      'aisix_config_last_reload_success_timestamp_seconds',
      'Unix time of the latest successful (nothing rejected) configuration load.',
      [],
      (g) => {
        const at = src.facts().lastSuccessAt;
        if (at) g.set([], Date.parse(at) / 1000);
      },
    ],
    // Per-kind gauges: a kind once reported stays, at 0, rather than disappearing (AISIX).
    [
      'aisix_config_rejected_resources',
      'Resources rejected by validation, by kind.',
      ['kind'],
      (g) => countBy(g, src.facts().rejected.map((x) => x.resource_kind)),
    ],
    [
      'aisix_config_partially_compatible_resources',
      'Served resources with ignored (unknown or inapplicable) fields, by kind; a row counts once.',
      ['kind'],
      (g) => {
        g.zero();
        for (const [kind, n] of Object.entries(src.facts().partiallyCompatibleRows)) g.set([kind], n);
      },
    ],
    [
      'aisix_config_stale_served_resources',
      'Resources serving a last-known-good value, by kind.',
      ['kind'],
      (g) => countBy(g, src.facts().rejected.filter((x) => x.serving_stale_since).map((x) => x.resource_kind)),
    ],
    ['aisix_config_hash_info', 'The hash of the configuration being served (value is always 1).', ['hash'], (g) => {
      g.reset();
      const a = src.facts().applied;
      if (a) g.set([a.config_hash], 1);
    }],
    ['aisix_config_observed_revision', 'etcd: the latest revision observed.', [], (g) => {
      const f = src.facts();
      g.reset();
      if (f.sourceType === 'etcd' && f.observedRevision !== undefined) g.set([], f.observedRevision);
    }],
    ['aisix_config_applied_revision', 'etcd: the revision of the configuration being served.', [], (g) => {
      const f = src.facts();
      g.reset();
      if (f.sourceType === 'etcd' && f.applied?.applied_revision !== undefined) g.set([], f.applied.applied_revision);
    }],
    ['aisix_config_source_connected', 'etcd: whether the source is connected (1) or not (0).', [], (g) => {
      const f = src.facts();
      g.reset();
      if (f.sourceType === 'etcd') g.set([], f.connected ? 1 : 0);
    }],
    ['aisix_deployment_state', 'Model health: 0 healthy, 2 down (cooldown or unhealthy).', DEPLOYMENT_LABELS, (g) => {
      g.reset();
      for (const row of src.deploymentStates?.() ?? []) g.set(row.labels, row.value);
    }],
    [
      'sluice_open_connections',
      'Open downstream connections on the proxy listener, idle pooled ones included.',
      [],
      (g) => {
        g.reset();
        const n = src.openConnections();
        if (n !== undefined) g.set([], n);
      },
    ],
    [
      'sluice_draining',
      'Whether the gateway is draining (1) or not (0).',
      [],
      (g) => g.set([], src.draining() ? 1 : 0),
    ],
  ];
}

/** Counts per kind; kinds reported before and absent now stay at 0. */
function countBy(g: Gauge, kinds: string[]): void {
  g.zero();
  for (const k of kinds) g.inc([k]);
}

/** One model's row of the status page's latency table (seconds; undefined when nothing was observed). */
export interface ModelLatency {
  model: string;
  requests: number;
  latencyP50: number | undefined;
  latencyP95: number | undefined;
  /** Streamed requests with a first token. */
  streams: number;
  ttftP50: number | undefined;
  ttftP95: number | undefined;
}

/** Bucket counts with the `+Inf` overflow appended (observations above the last edge). */
function withOverflow(m: { counts: Float64Array; count: number }): number[] {
  let inBuckets = 0;
  for (let i = 0; i < m.counts.length; i++) inBuckets += m.counts[i]!;
  return [...m.counts, m.count - inBuckets];
}
