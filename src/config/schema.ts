// `config.yaml`, the bootstrap file (docs/configuration.md). Unknown keys are errors naming the key; AISIX keys that
// Sluice does not implement are accepted and reported once as ignored, so an AISIX file boots unchanged.
import { z } from 'zod';
import { parseCidr } from '../util/cidr.ts';
import { BudgetListSchema } from '../resources/budget-schema.ts';
import { ClientTypeRulesSchema } from './client-type-rules.ts';
import { UrlRewritesSchema } from './url-rewrites.ts';

const nonNegInt = z.number().int().nonnegative();
/** `host:port`, `[v6]:port` or `:port`. Checked again (and resolved) before anything binds. */
const addr = z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]*):\d{1,5}$/, 'must be host:port, e.g. 0.0.0.0:3000');

/** A listener's certificate and key (PEM files), read before anything binds. */
const listenerTls = z.strictObject({ cert_file: z.string().min(1), key_file: z.string().min(1) });

const redisUrl = z.string().regex(/^rediss?:\/\/[^\s/]+/, 'must be a redis:// or rediss:// URL');
/** A Cluster node or a Sentinel: a URL, or `host:port`. */
const redisAddr = z.string().regex(
  /^(rediss?:\/\/[^\s/]+|[^\s:/]+:\d{1,5})\/?$/,
  'must be redis://host:port, rediss://host:port or host:port',
);
/** A Redis connection (AISIX's `RedisConnConfig`): `ratelimit.redis` and `cache.redis` share the shape. */
export const RedisConnSchema = z.strictObject({
  mode: z.enum(['single', 'cluster', 'sentinel']).default('single'),
  url: redisUrl.optional(),
  nodes: z.array(redisAddr).default([]),
  sentinels: z.array(redisAddr).default([]),
  master_name: z.string().min(1).optional(),
  username: z.string().min(1).optional(),
  password: z.string().min(1).optional(),
  database: nonNegInt.optional(),
  tls: z.strictObject({
    ca_file: z.string().min(1).optional(),
    client_cert_file: z.string().min(1).optional(),
    client_key_file: z.string().min(1).optional(),
    verify: z.boolean().default(true),
  }).optional(),
  timeout_secs: z.number().int().min(1).default(5),
  // Sluice-only: the budget of one Redis command, apart from the connection's timeout_secs; past it the
  // command fails and the store counts as down (docs/scaling.md "When Redis is unavailable").
  command_timeout_ms: z.number().int().positive().default(250),
});
export type RedisConn = z.infer<typeof RedisConnSchema>;

/** The members each `mode` needs, reported under `redis.<member>`. */
function checkRedisConn(r: RedisConn, ctx: z.RefinementCtx): void {
  const need = (ok: boolean, path: string[], message: string) => {
    if (!ok) ctx.addIssue({ code: 'custom', path, message });
  };
  const m = r.mode;
  if (m === 'single') need(r.url !== undefined, ['redis', 'url'], 'required when mode is single');
  if (m === 'cluster') need(r.nodes.length > 0, ['redis', 'nodes'], 'required (non-empty) when mode is cluster');
  if (m === 'sentinel') {
    need(r.sentinels.length > 0, ['redis', 'sentinels'], 'required (non-empty) when mode is sentinel');
    need(r.master_name !== undefined, ['redis', 'master_name'], 'required when mode is sentinel');
  }
  const t = r.tls;
  need(
    !t || (t.client_cert_file === undefined) === (t.client_key_file === undefined),
    ['redis', 'tls'],
    'client_cert_file and client_key_file go together',
  );
}

/**
 * AISIX's `ratelimit` section: where rate-limit counters live. `memory` counts per replica; `redis` shares
 * them through one Redis (docs/scaling.md). `concurrency_ttl_secs` reclaims slots a crashed replica held.
 */
const RateLimitConfigSchema = z.strictObject({
  backend: z.enum(['memory', 'redis']).default('memory'),
  redis: RedisConnSchema.optional(),
  concurrency_ttl_secs: nonNegInt.default(300),
}).superRefine((r, ctx) => {
  if (r.backend !== 'redis') return;
  if (!r.redis) ctx.addIssue({ code: 'custom', path: ['redis'], message: 'required when backend is redis' });
  else checkRedisConn(r.redis, ctx);
}).prefault({});

/**
 * AISIX's `cache` section (docs/cache.md): `cache.redis` is the store of `backend: redis` policies; the
 * memory store always exists. `memory` is Sluice's: the memory store's bounds, in entries and in bytes.
 */
const CacheConfigSchema = z.strictObject({
  backend: z.enum(['memory', 'redis']).default('memory'),
  redis: RedisConnSchema.optional(),
  memory: z.strictObject({
    max_entries: z.number().int().positive().default(10_000),
    max_bytes: z.number().int().positive().default(67_108_864),
  }).prefault({}),
}).superRefine((c, ctx) => {
  if (c.backend === 'redis' && !c.redis) {
    ctx.addIssue({ code: 'custom', path: ['redis'], message: 'cache.backend = redis but cache.redis missing' });
  }
  if (c.redis) checkRedisConn(c.redis, ctx);
}).prefault({});

/**
 * Sluice's `budgets` (docs/budgets.md "config.yaml"): where spend counters live (`memory` per replica, `redis`
 * shared), what a hard budget does while Redis does not answer, the threshold webhook, the reservation's
 * assumptions, and the budgets of teams and users (api keys and models carry theirs in the resources).
 */
const BudgetsConfigSchema = z.strictObject({
  backend: z.enum(['memory', 'redis']).default('memory'),
  redis: RedisConnSchema.optional(),
  /** `refuse` (fail closed) or `allow` (fail open) a call a hard budget covers while the store is down. */
  on_store_unavailable: z.enum(['refuse', 'allow']).default('refuse'),
  /** A reservation a replica never settled (it crashed) is released after this long. */
  reservation_ttl_secs: z.number().int().positive().default(900),
  /** The output tokens reserved for a call that states no maximum. */
  default_max_output_tokens: z.number().int().positive().default(4096),
  webhook: z.strictObject({
    url: z.string().regex(/^https?:\/\/\S+$/, 'must be an http(s) URL'),
    headers: z.record(z.string(), z.string()).default({}),
    timeout_ms: z.number().int().positive().default(5000),
  }).optional(),
  teams: z.record(z.string().min(1), BudgetListSchema).default({}),
  users: z.record(z.string().min(1), BudgetListSchema).default({}),
}).superRefine((b, ctx) => {
  if (b.backend !== 'redis') return;
  if (!b.redis) ctx.addIssue({ code: 'custom', path: ['redis'], message: 'required when backend is redis' });
  else checkRedisConn(b.redis, ctx);
}).prefault({});

/**
 * Sluice's `responses_store` (docs/routing.md "Responses state"): where translated Responses answers are kept so
 * `previous_response_id` and `item_reference` resolve. `memory` per replica, `redis` shared by a fleet; every
 * entry lives `ttl_secs`; `max_bytes` bounds the memory store, `max_entry_bytes` any one stored response.
 */
const ResponsesStoreConfigSchema = z.strictObject({
  backend: z.enum(['memory', 'redis']).default('memory'),
  redis: RedisConnSchema.optional(),
  ttl_secs: z.number().int().positive().default(86_400),
  max_entries: z.number().int().positive().default(10_000),
  max_bytes: z.number().int().positive().default(67_108_864),
  max_entry_bytes: z.number().int().positive().default(4_194_304),
}).superRefine((c, ctx) => {
  if (c.backend !== 'redis') return;
  if (!c.redis) ctx.addIssue({ code: 'custom', path: ['redis'], message: 'required when backend is redis' });
  else checkRedisConn(c.redis, ctx);
}).prefault({});

/** The upper bound on a bucket list (AISIX's `resolve_edges`). */
const MAX_BUCKET_EDGES = 64;

/**
 * One `observability.metrics.buckets.<field>` list: seconds, strictly ascending, finite and positive; a
 * comma list (`0.5,3`, the environment form) is split. AISIX's boot-time messages, word for word.
 */
const bucketEdges = () =>
  z.preprocess(
    (v) => (typeof v === 'string' ? v.split(',').map((x) => (x.trim() === '' ? x : Number(x.trim()))) : v),
    z.array(z.unknown()),
  ).superRefine((edges, ctx) => {
    const fail = (message: string, index?: number) =>
      ctx.addIssue({ code: 'custom', message, ...(index !== undefined ? { path: [index] } : {}) });
    if (edges.length === 0) return fail('must list at least one bucket edge');
    if (edges.length > MAX_BUCKET_EDGES) return fail(`${edges.length} edges exceed the limit of ${MAX_BUCKET_EDGES}`);
    for (let i = 0; i < edges.length; i++) {
      const v = edges[i];
      if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
        return fail(
          `${formatEdge(v)} must be a finite positive number of seconds (the +Inf bucket is added automatically)`,
          i,
        );
      }
      const prev = edges[i - 1] as number | undefined;
      if (prev !== undefined && v <= prev) {
        return fail(
          `${v} must be greater than the preceding edge ${prev} — bucket edges are cumulative and must strictly ascend`,
          i,
        );
      }
    }
  }).transform((edges) => edges as number[]);

function formatEdge(v: unknown): string {
  if (v === Infinity) return 'inf';
  return typeof v === 'number' ? String(v) : JSON.stringify(v) ?? String(v);
}

/** AISIX's default edges (docs/aisix-compatibility.md "Metrics"); `+Inf` is added by the exposition. */
export const DEFAULT_BUCKETS = {
  request_e2e_latency: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 420, 600],
  request_ttft: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
  guardrail_latency: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  a2a_ttfb: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
} as const;

const BucketsSchema = z.strictObject({
  request_e2e_latency: bucketEdges().default([...DEFAULT_BUCKETS.request_e2e_latency]),
  request_ttft: bucketEdges().default([...DEFAULT_BUCKETS.request_ttft]),
  guardrail_latency: bucketEdges().default([...DEFAULT_BUCKETS.guardrail_latency]),
  a2a_ttfb: bucketEdges().default([...DEFAULT_BUCKETS.a2a_ttfb]),
}).prefault({});

/** The message AISIX stops its boot with; Sluice reports it on the key. */
export const OTLP_EMPTY_ENDPOINT =
  'otlp init failed: otlp exporter install failed: tracing.otlp.enabled=true but endpoint is empty';

/**
 * `observability.tracing.otlp`: AISIX's keys. Here they export spans (docs/operations.md "Tracing"), as
 * one exporter named `config`; `headers` is Sluice's.
 */
const TracingSchema = z.strictObject({
  otlp: z.strictObject({
    enabled: z.boolean().default(false),
    endpoint: z.string().optional(),
    sample_ratio: z.number().min(0).max(1).default(1),
    headers: z.record(z.string(), z.string()).default({}),
  }).superRefine((o, ctx) => {
    if (o.enabled && !o.endpoint?.trim()) {
      ctx.addIssue({ code: 'custom', path: ['endpoint'], message: OTLP_EMPTY_ENDPOINT });
    } else if (o.enabled && !/^https?:\/\/[^\s/]+/.test(o.endpoint!)) {
      ctx.addIssue({
        code: 'custom',
        path: ['endpoint'],
        message: 'must be an http(s) URL, the full traces URL (…/v1/traces)',
      });
    }
  }).prefault({}),
}).prefault({});

/**
 * `proxy.request_body_limit_bytes` when the file does not set it (AISIX's default is 0, no limit; why this value:
 * docs/configuration.md "Bodies and idle connections").
 */
export const DEFAULT_REQUEST_BODY_LIMIT_BYTES = 33_554_432;
/** `downstream.idle_timeout_secs` when the file does not set it (AISIX's default is 0, never). */
export const DEFAULT_IDLE_TIMEOUT_SECS = 30;

export const ConfigSchema = z.strictObject({
  resources_file: z.string().min(1).optional(),
  etcd: z.strictObject({
    endpoints: z.array(z.string().min(1)).default([]),
    prefix: z.string().min(1).default('/aisix'),
    user: z.string().min(1).optional(),
    password_env: z.string().min(1).optional(),
    tls: z.strictObject({
      ca_cert_file: z.string().optional(),
      client_cert_file: z.string().optional(),
      client_key_file: z.string().optional(),
    }).optional(),
    dial_timeout_ms: nonNegInt.default(5000),
    request_timeout_ms: nonNegInt.default(5000),
    /**
     * AISIX's environment namespace: non-empty, the rows are read under `<prefix>/<env_id>/`, and the Redis
     * rate-limit and response-cache keys carry it (docs/cache.md).
     */
    env_id: z.string().optional(),
  }).transform((e) => (e.env_id ? { ...e, prefix: `${e.prefix.replace(/\/+$/, '')}/${e.env_id}` } : e))
    .prefault({}),
  proxy: z.strictObject({
    addr,
    tls: listenerTls.optional(),
    http2: z.boolean().default(false),
    // AISIX's key; Sluice's default is finite where AISIX's is 0 = no limit, which an explicit 0 still means
    // (boot WARN). The value and its reasons: docs/configuration.md "Bodies and idle connections".
    request_body_limit_bytes: nonNegInt.default(DEFAULT_REQUEST_BODY_LIMIT_BYTES),
    // Sluice-only: more header fields or bytes than this → 431 before anything else (docs/operations.md).
    // ≤ 999: Deno's node:http keeps only the first 1000 fields, so a larger limit could not be checked there.
    max_request_headers: z.number().int().positive().max(999).default(100),
    max_request_header_bytes: z.number().int().positive().default(32_768),
    // Sluice-only: false omits `x-aisix-served-by`, which names the routing member that answered (docs/routing.md).
    served_by_header: z.boolean().default(true),
    request_id: z.strictObject({
      accept_headers: z.array(z.string().min(1)).default(['x-aisix-request-id']),
    }).prefault({}),
    /** Sluice-only: the product name callers see (`Server`, `/v1/models` `owned_by`); `aisix` keeps AISIX's. */
    identity: z.enum(['sluice', 'aisix']).default('sluice'),
    /** AISIX's path rewrites before route matching (docs/routing.md "URL rewrites"). */
    url_rewrites: UrlRewritesSchema,
    /** AISIX's nginx `set_real_ip_from` + `real_ip_recursive`: the client address behind trusted proxies. */
    real_ip: z.strictObject({
      trusted_proxies: z.array(
        z.string().refine((s) => parseCidr(s) !== undefined, 'must be a CIDR block (e.g. 10.0.0.0/8) or an address'),
      ).default([]),
      recursive: z.boolean().default(false),
      header: z.string().min(1).transform((h) => h.toLowerCase()).default('x-forwarded-for'),
    }).prefault({}),
  }),
  admin: z.strictObject({
    enabled: z.boolean().default(true),
    addr: addr.default('127.0.0.1:3001'),
    admin_keys: z.array(z.string().min(1)).default([]),
    /** Sluice's: keys that may also write keys and budgets to etcd; none: the API stays read-only (docs/admin.md). */
    write_keys: z.array(z.string().min(1)).default([]),
    tls: listenerTls.optional(),
  }).prefault({}),
  observability: z.strictObject({
    log_level: z.enum(['trace', 'debug', 'info', 'warn', 'error']).default('info'),
    log_format: z.enum(['json', 'text']).default('text'),
    access_log: z.boolean().default(true),
    metrics: z.strictObject({
      prometheus: z.strictObject({
        enabled: z.boolean().default(true),
        path: z.string().startsWith('/').default('/metrics'),
        // AISIX's default is 0.0.0.0:9090; this listener is unauthenticated and its metrics name callers, so
        // Sluice's is loopback, like the admin listener's (docs/security.md "Deployments").
        addr: addr.default('127.0.0.1:9090'),
      }).prefault({}),
      buckets: BucketsSchema,
      // AISIX's operator rules for `client_type`, ahead of its built-in table (docs/usage-events.md "Client type").
      client_type_rules: ClientTypeRulesSchema,
    }).prefault({}),
    tracing: TracingSchema,
  }).prefault({}),
  upstream: z.strictObject({
    // AISIX's outbound TLS for every upstream call: `ca_file` is trusted on top of the default roots; the
    // client certificate is presented to upstreams that ask; `verify: false` accepts any certificate (WARN).
    tls: z.strictObject({
      ca_file: z.string().min(1).optional(),
      client_cert_file: z.string().min(1).optional(),
      client_key_file: z.string().min(1).optional(),
      verify: z.boolean().default(true),
    }).superRefine((t, ctx) => {
      const pair = [['client_cert_file', 'client_key_file'], ['client_key_file', 'client_cert_file']] as const;
      for (const [has, needs] of pair) {
        if (t[has] !== undefined && t[needs] === undefined) {
          ctx.addIssue({
            code: 'custom',
            path: [needs],
            message: `upstream.tls.${has} requires upstream.tls.${needs}`,
          });
        }
      }
    }).optional(),
    // AISIX's key and default: an idle pooled upstream connection is closed after this long; 0 = the
    // runtime's own rule (docs/configuration.md "upstream").
    pool_idle_timeout_secs: nonNegInt.default(30),
    timeout_ms: nonNegInt.default(6_000_000),
    stream_timeout_ms: nonNegInt.default(0),
    connect_timeout_ms: nonNegInt.default(5000),
    retries: nonNegInt.default(2),
    // Sluice-only: a larger upstream answer is refused (502); 0 = no limit (docs/operations.md).
    max_response_bytes: nonNegInt.default(33_554_432),
    // Sluice-only: the bytes all answers being read whole (not streamed) may hold together; over it a new
    // answer fails with 503; 0 = no bound (docs/operations.md "Limits and failure behaviour").
    max_buffered_response_bytes: nonNegInt.default(67_108_864),
    // Sluice-only: the longest SSE line (passed through) or event (translated) a stream may carry; over it
    // the stream ends with an error event; 0 = no bound (docs/configuration.md).
    max_sse_event_bytes: nonNegInt.default(4_194_304),
  }).prefault({}),
  downstream: z.strictObject({
    sse_keepalive_interval_secs: nonNegInt.default(15),
    // AISIX's key: close an HTTP/1.1 connection idle between requests, or an HTTP/2 one with no stream open,
    // after this long. Sluice's default is finite where AISIX's is 0 = never, which an explicit 0 still means
    // (boot WARN; docs/configuration.md "Bodies and idle connections").
    idle_timeout_secs: nonNegInt.default(DEFAULT_IDLE_TIMEOUT_SECS),
    // Sluice-only: close a connection whose first request head has not arrived this long after it was
    // accepted; 0 = never (docs/operations.md "Limits and failure behaviour").
    first_request_timeout_secs: nonNegInt.default(30),
  }).prefault({}),
  shutdown: z.strictObject({
    min_drain_secs: nonNegInt.default(30),
  }).prefault({}),
  managed: z.strictObject({
    snapshot_cache_path: z.string().min(1).optional(),
  }).prefault({}),
  ratelimit: RateLimitConfigSchema,
  cache: CacheConfigSchema,
  responses_store: ResponsesStoreConfigSchema,
  budgets: BudgetsConfigSchema,
  /** AISIX's: where `kind: bedrock` guardrails call ApplyGuardrail instead of AWS; empty = unset. */
  bedrock_endpoint_url: z.string().optional(),
}).superRefine((c, ctx) => {
  if (c.resources_file && c.etcd.endpoints.length > 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['resources_file'],
      message: 'resources_file and etcd.endpoints are mutually exclusive: choose one configuration source',
    });
  }
  if (!c.resources_file && c.etcd.endpoints.length === 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['resources_file'],
      message: 'no configuration source: set resources_file or etcd.endpoints',
    });
  }
  if (c.admin.enabled && c.admin.admin_keys.length === 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['admin', 'admin_keys'],
      message: 'required (non-empty) when admin.enabled is true; or set admin.enabled: false',
    });
  }
});

export type Config = z.infer<typeof ConfigSchema>;

/**
 * AISIX keys Sluice accepts and ignores (docs/configuration.md). A path ending in `*` covers every key below it.
 * `managed.snapshot_cache_path` is implemented, so `managed.*` is spelled out as "anything else".
 */
export const IGNORED_KEYS = [
  'proxy.thread_per_core',
  'proxy.workers',
  'observability.service_name',
  'observability.metrics.otlp',
  'observability.metrics.labels',
  'upstream.tcp_keepalive_*',
  'upstream.pool_max_idle_per_host',
  'etcd.tls.domain_name',
  'managed.*',
] as const;

/**
 * AISIX keys Sluice does not implement and must not ignore: serving without them would loosen access or
 * leave configured addresses unserved. Each one stops the boot with this advice.
 */
export const REFUSED_KEYS: Record<string, string> = {
  'proxy.listeners':
    'not implemented by Sluice (it binds one proxy listener, proxy.addr); run one gateway per address or put a proxy in front, and remove the key',
};

/** Whether `path` (dotted) is an ignored AISIX key. */
export function isIgnoredKey(path: string): boolean {
  if (path === 'managed.snapshot_cache_path') return false;
  return IGNORED_KEYS.some((k) => (k.endsWith('*') ? path.startsWith(k.slice(0, -1)) : path === k));
}
