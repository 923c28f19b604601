// Every metric family the gateway exposes (SPEC §9), declared in one place. Gauges that mirror state
// (config status, in-flight, connections) are computed at scrape time from the one source of truth.
import type { DirectModel, ProviderKey } from '../resources/schema.ts';
import type { ConfigFacts } from '../status/config-status.ts';
import { Counter, Gauge, Histogram, Registry } from './metrics.ts';

/** Labels of every `aisix_deployment_*` series, in declaration order. */
export type DeploymentLabels = [provider: string, model: string, upstream_model: string, provider_key_id: string];

/**
 * The deployment labels of a direct model. `upstream_model` is the configured `model_name` — for a
 * wildcard alias its pattern, never the caller's name — so callers cannot grow the label set.
 */
export function deploymentLabels(model: DirectModel, key: ProviderKey | undefined): DeploymentLabels {
  return [model.provider ?? key?.provider ?? '', model.display_name, model.model_name, model.provider_key_id];
}

export interface MetricsSources {
  facts(): ConfigFacts;
  inFlight(): number;
  openConnections(): number | undefined;
  draining(): boolean;
  /** aisix_deployment_state rows; filled in by model health. */
  deploymentStates?(): { labels: DeploymentLabels; value: number }[];
}

export class GatewayMetrics {
  readonly registry = new Registry();

  readonly reloadsTotal = this.registry.register(
    new Counter('aisix_config_reloads_total', 'Configuration loads attempted (file loads and reloads, etcd applies).'),
  );
  readonly reloadFailures = this.registry.register(
    new Counter('aisix_config_reload_failures_total', 'Configuration loads that failed, by reason.', ['reason']),
  );
  readonly requests = this.registry.register(
    new Counter('aisix_proxy_requests_total', 'Proxy requests completed.', ['endpoint', 'model', 'status', 'outcome']),
  );
  readonly duration = this.registry.register(
    new Histogram('aisix_proxy_request_duration_seconds', 'Proxy request duration from arrival to last byte.', [
      'endpoint',
      'model',
    ]),
  );
  readonly deploymentRequests = this.registry.register(
    new Counter('aisix_deployment_requests_total', 'Upstream attempts per model.', [
      'provider',
      'model',
      'upstream_model',
      'provider_key_id',
    ]),
  );
  readonly deploymentSuccess = this.registry.register(
    new Counter('aisix_deployment_success_responses_total', 'Successful upstream attempts per model.', [
      'provider',
      'model',
      'upstream_model',
      'provider_key_id',
    ]),
  );
  readonly deploymentFailure = this.registry.register(
    new Counter('aisix_deployment_failure_responses_total', 'Failed upstream attempts per model.', [
      'provider',
      'model',
      'upstream_model',
      'provider_key_id',
    ]),
  );
  readonly cooledDown = this.registry.register(
    new Counter('aisix_deployment_cooled_down_total', 'Times a model entered cooldown.', [
      'provider',
      'model',
      'upstream_model',
      'provider_key_id',
    ]),
  );
  readonly fallbacks = this.registry.register(
    new Counter(
      'aisix_proxy_fallbacks_total',
      'Failovers: times a request moved on from a routing target to the next one.',
      ['model'],
    ),
  );

  constructor(src: MetricsSources) {
    const r = this.registry;
    r.register(
      new Gauge(
        'aisix_config_last_reload_successful',
        'Whether the latest configuration load succeeded (1) or failed (0).',
        [],
        (g) => {
          const lr = src.facts().lastReload;
          if (lr) g.set([], lr.successful ? 1 : 0);
        },
      ),
    );
    r.register(
      new Gauge(
        'aisix_config_last_reload_success_timestamp_seconds',
        'Unix time of the latest successful apply.',
        [],
        (g) => {
          const a = src.facts().applied;
          if (a) g.set([], Date.parse(a.applied_at) / 1000);
        },
      ),
    );
    r.register(
      new Gauge(
        'aisix_config_rejected_resources',
        'Resources rejected by validation, by kind.',
        ['kind'],
        (g) =>
          countBy(
            g,
            src.facts().rejected.map((x) => x.resource_kind),
          ),
      ),
    );
    r.register(
      new Gauge('aisix_config_partially_compatible_resources', 'Resources loaded with unknown fields, by kind.', [
        'kind',
      ], (g) => {
        g.reset();
        for (const p of src.facts().partiallyCompatible) {
          g.inc([p.resource_kind], p.count);
        }
      }),
    );
    r.register(
      new Gauge(
        'aisix_config_stale_served_resources',
        'Resources serving a last-known-good value, by kind.',
        ['kind'],
        (g) => countBy(g, src.facts().rejected.filter((x) => x.serving_stale_since).map((x) => x.resource_kind)),
      ),
    );
    r.register(
      new Gauge(
        'aisix_config_hash_info',
        'The hash of the configuration being served (value is always 1).',
        ['hash'],
        (g) => {
          g.reset();
          const a = src.facts().applied;
          if (a) g.set([a.config_hash], 1);
        },
      ),
    );
    r.register(
      new Gauge('aisix_config_observed_revision', 'etcd: the latest revision observed.', [], (g) => {
        const f = src.facts();
        g.reset();
        if (f.sourceType === 'etcd' && f.observedRevision !== undefined) g.set([], f.observedRevision);
      }),
    );
    r.register(
      new Gauge('aisix_config_applied_revision', 'etcd: the revision of the configuration being served.', [], (g) => {
        const f = src.facts();
        g.reset();
        if (f.sourceType === 'etcd' && f.applied?.applied_revision !== undefined) g.set([], f.applied.applied_revision);
      }),
    );
    r.register(
      new Gauge('aisix_config_source_connected', 'etcd: whether the source is connected (1) or not (0).', [], (g) => {
        const f = src.facts();
        g.reset();
        if (f.sourceType === 'etcd') g.set([], f.connected ? 1 : 0);
      }),
    );
    r.register(
      new Gauge('aisix_deployment_state', 'Model health: 0 healthy, 2 down (cooldown or unhealthy).', [
        'provider',
        'model',
        'upstream_model',
        'provider_key_id',
      ], (g) => {
        g.reset();
        for (const row of src.deploymentStates?.() ?? []) g.set(row.labels, row.value);
      }),
    );
    r.register(
      new Gauge(
        'aisix_proxy_in_flight_requests',
        'Requests being served on the proxy listener (a stream until its last byte).',
        [],
        (g) => g.set([], src.inFlight()),
      ),
    );
    r.register(
      new Gauge(
        'sluice_open_connections',
        'Open downstream connections on the proxy listener, idle pooled ones included.',
        [],
        (g) => {
          g.reset();
          const n = src.openConnections();
          if (n !== undefined) g.set([], n);
        },
      ),
    );
    r.register(
      new Gauge(
        'sluice_draining',
        'Whether the gateway is draining (1) or not (0).',
        [],
        (g) => g.set([], src.draining() ? 1 : 0),
      ),
    );
  }

  render(): string {
    return this.registry.render();
  }

  /** AISIX's rate-limit refusals: `scope` requests|tokens|concurrency, `layer` api_key|model, `policy_id` "". */
  readonly rateLimitRejections = this.registry.register(
    new Counter('aisix_ratelimit_rejections_total', 'Requests refused by a caller rate limit.', [
      'scope',
      'layer',
      'policy_id',
    ]),
  );

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

function countBy(g: Gauge, kinds: string[]): void {
  g.reset();
  for (const k of ['provider_keys', 'models', 'api_keys']) g.set([k], 0);
  for (const k of kinds) g.inc([k]);
}
