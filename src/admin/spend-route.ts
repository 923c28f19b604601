// `GET /admin/v1/spend?by=team&since=7d[&until=…]` (docs/admin.md "Spend reports"): the budget counters Redis
// holds, summed per key, team, user or model, behind any admin key (a read). Without Redis-backed budgets
// there is nothing shared to report: 501 saying what to configure.
import { redisClientOptions } from '../config/redis.ts';
import type { Config } from '../config/schema.ts';
import { bearerToken, timingSafeEqual } from '../http/auth.ts';
import { errorResponse, errors, ProxyError } from '../http/errors.ts';
import type { Platform } from '../platform.ts';
import type { AdminExtension } from './extension.ts';
import { RedisSpendSource } from './spend-redis.ts';
import { nameRows, type SpendNames, spendQuery, type SpendSource } from './spend-report.ts';

export const SPEND_PATH = '/admin/v1/spend';

export interface SpendRouteDeps {
  /** Undefined: budgets are not counted in Redis. */
  source: SpendSource | undefined;
  /** Every admin key (read or write): a report is a read. */
  keys: readonly string[];
  now(): number;
  /** The served keys and models, to name the rows; undefined before a configuration applied. */
  names?(): SpendNames | undefined;
}

export function createSpendRoute(deps: SpendRouteDeps): AdminExtension {
  return {
    handles: (_method, path) => path === SPEND_PATH,
    fetch: async (req) => {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        const res = errorResponse(errors.methodNotAllowed(req.method, SPEND_PATH));
        res.headers.set('allow', 'GET,HEAD');
        return res;
      }
      const token = bearerToken(req.headers);
      if (token === undefined) return errorResponse(errors.missingAuth());
      const matches = await Promise.all(deps.keys.map((k) => timingSafeEqual(k, token)));
      if (!matches.includes(true)) return errorResponse(errors.unknownKey());
      if (!deps.source) {
        return errorResponse(
          new ProxyError(
            501,
            'not_found',
            'spend reports read the budget counters in Redis: set budgets.backend: redis and budgets.redis',
          ),
        );
      }
      const q = Object.fromEntries(new URL(req.url).searchParams);
      let report;
      try {
        report = await spendQuery(deps.source, q, deps.now());
      } catch {
        // The client's error may name the connection; the caller gets where to look, not its text.
        return errorResponse(
          new ProxyError(503, 'service_unavailable', 'the budget counters could not be read: check budgets.redis'),
        );
      }
      if (typeof report === 'string') return errorResponse(new ProxyError(400, 'invalid_request_error', report));
      const names = deps.names?.();
      return Response.json(names ? nameRows(report, names) : report);
    },
  };
}

/** The Redis the budgets count in, opened at the first report; undefined when budgets do not use Redis. */
export function spendSourceFor(
  config: { budgets: Pick<Config['budgets'], 'backend' | 'redis'>; etcd: Pick<Config['etcd'], 'env_id'> },
  platform: Pick<Platform, 'redis'>,
): SpendSource | undefined {
  const c = config.budgets;
  if (c.backend !== 'redis' || !c.redis || !platform.redis) return undefined;
  const redis = c.redis;
  const open = platform.redis.bind(platform);
  let client: ReturnType<typeof open> | undefined;
  return {
    counters: async () => {
      client ??= open(redisClientOptions(redis, 'budgets.redis'));
      // The client queues nothing while it connects: wait for it, bounded by the configured timeout.
      if (!await client.waitReady(redis.timeout_secs * 1000)) throw new Error('budgets.redis: not reachable');
      return new RedisSpendSource(client, config.etcd.env_id || undefined).counters();
    },
    close: () => client?.quit() ?? Promise.resolve(),
  };
}

export function spendRouteFor(
  host: {
    config: Pick<Config, 'budgets' | 'etcd' | 'admin'>;
    platform: Pick<Platform, 'redis'>;
    readonly snapshot?: { readonly resources: SpendNames } | undefined;
  },
  now: () => number = Date.now,
): AdminExtension {
  const a = host.config.admin;
  return createSpendRoute({
    source: spendSourceFor(host.config, host.platform),
    keys: [...a.admin_keys, ...a.write_keys],
    now,
    names: () => host.snapshot?.resources,
  });
}
