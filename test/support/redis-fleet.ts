// Gateway replicas of each runtime sharing one real Redis as their rate-limit store, for the fleet process
// tests (test/process/ratelimit-redis-fleet, ratelimit-redis-stall, policies-redis-fleet).
import { type GatewayProcess, type RuntimeName, spawnGateway } from './process.ts';

/**
 * resources.yaml over one mock upstream: its key `mock` and the model `gpt-test` (no retries), then `rest`
 * (more models, `api_keys`, policies) from the next line on.
 */
export function fleetResources(upstreamBase: string, rest: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up, api_base: ${upstreamBase} }
models:
  - { display_name: gpt-test, model_name: gpt-upstream, provider_key: mock, retries: 0 }
${rest}`;
}

/**
 * config.yaml of a replica: proxy and status on free ports, no admin, no access log, no drain wait, and the
 * `redis` rate-limit backend with `redis` inside its braces, then `ratelimitRest` (more `ratelimit:` lines).
 */
export function fleetConfig(redis: string, ratelimitRest = ''): string {
  return `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { access_log: false, metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
ratelimit:
  backend: redis
  redis: { ${redis} }
${ratelimitRest}`;
}

/** A gateway of each of `runtimes` on `config`, `resources` and `env`; resolves once every one is ready. */
export async function spawnFleet(
  runtimes: readonly RuntimeName[],
  o: { config: string; resources: string; env: Record<string, string> },
): Promise<GatewayProcess[]> {
  const files = { 'resources.yaml': o.resources };
  const gws = await Promise.all(
    runtimes.map((runtime) => spawnGateway({ runtime, config: o.config, files, env: o.env })),
  );
  await Promise.all(gws.map((g) => g.waitReady('/readyz', 'proxy', 60_000)));
  return gws;
}
