// The Cloudflare Workers fetch handler (README.md "Runtimes"): the proxy routes (`/livez`, `/readyz`, `/v1/*`) and,
// behind a bearer token, the status routes (`/status/*`, `/metrics`) on one handler. Workers has no
// listeners, no signals and no writable files: config.yaml and resources.yaml are text bundled at build
// time, read through a read-only `files`. The env bindings (vars, secrets) that `${VAR}`, `key_env` and
// the `AISIX_*` overrides read arrive only with a request, so the gateway is built on the first request of
// an isolate and kept in module scope for the isolate's life. Drain is the platform's (docs/workers.md).
//
// etcd mode (`etcd.endpoints` instead of `resources_file`): a watch cannot outlive the request that opened
// it, so the isolate reads etcd by range polling (src/sources/etcd/poll.ts, the watch source's row rules):
// a full range on the first request (which waits for it), then at most every `SLUICE_ETCD_POLL_SECS`
// (default 10) on a later request, in `ctx.waitUntil` so no caller waits for it. Until a configuration is
// applied `/readyz` and `/v1/*` answer 503 (elsewhere the proxy listener is simply not bound).
//
// Kept apart from runtimes/workers.ts (which imports the bundled `.yaml` files, something only the
// Workers bundler understands) so that tests can run this handler on Node with a bundle of their own.
import { type AssembledGateway, createGateway, loadBootConfig } from '../src/boot.ts';
import type { Config } from '../src/config/schema.ts';
import { MSG } from '../src/observability/messages.ts';
import type { ConnInfo, Platform, PlatformFiles } from '../src/platform.ts';
import { checkedModels } from '../src/routing/model-check.ts';
import { EtcdPollSource } from '../src/sources/etcd/poll.ts';
import { fetchUpstream } from '../src/upstream-fetch.ts';
import { parseBearer, timingSafeEqual } from '../src/http/auth.ts';
import { envelopeFor, errorResponse, errors } from '../src/http/errors.ts';

/** The Worker secret (or var) holding the bearer token of the status routes; unset = routes not mounted. */
export const STATUS_TOKEN_VAR = 'SLUICE_STATUS_TOKEN';
/** The Worker var with the etcd poll interval in seconds (etcd mode); default 10. */
export const ETCD_POLL_VAR = 'SLUICE_ETCD_POLL_SECS';
const DEFAULT_ETCD_POLL_SECS = 10;

/** Files bundled into the Worker at build time, by the path the config refers to them with. */
export interface WorkerBundle {
  configPath: string;
  /** path → text; must hold `configPath` and the config's `resources_file` (resolved against it). */
  files: Record<string, string>;
}

/** The Worker's env bindings: vars and secrets are strings; other bindings (KV, R2 …) are ignored. */
export type WorkerEnv = Record<string, unknown>;

/** The part of the Workers ExecutionContext used here: etcd polls run in `waitUntil` after the response. */
export interface WorkerContext {
  waitUntil(promise: Promise<unknown>): void;
}

/** The module-worker shape (`export default { fetch }`). */
export interface SluiceWorker {
  fetch(req: Request, env: WorkerEnv, ctx?: WorkerContext): Promise<Response>;
}

type Serve = (req: Request, ctx?: WorkerContext) => Promise<Response>;

const LOG = {
  configFailed: 'bundled configuration failed to load — every request answers 503 until a fixed version is deployed',
  resourcesFailed: 'bundled resources file failed to load — /readyz answers 503 until a fixed version is deployed',
  ignoredOnWorkers: 'config keys that mean nothing on Workers are ignored',
  etcdWaiting: 'no etcd configuration yet — /readyz and /v1/* answer 503 until the first key appears under the prefix',
  noBackgroundChecks:
    'background_model_check does not run on Workers (no work outside a request); these models are judged by caller traffic only',
} as const;

const TEXT = { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' };

export interface WorkerOptions {
  /** The etcd poller's clock (Unix ms), for tests that step past the poll interval; default Date.now. */
  now?: () => number;
}

export function createWorker(bundle: WorkerBundle, opts: WorkerOptions = {}): SluiceWorker {
  // One per isolate. A boot that threw (a bug, not a bad file: those are answered) is retried next request.
  let booted: Promise<Serve> | undefined;
  return {
    async fetch(req, env, ctx) {
      booted ??= boot(bundle, stringBindings(env), opts).catch((e: unknown) => {
        booted = undefined;
        throw e;
      });
      return (await booted)(req, ctx);
    },
  };
}

/** Vars and secrets only: what `${VAR}`, `key_env` and `AISIX_*` overrides may read. */
function stringBindings(env: WorkerEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env ?? {})) if (typeof v === 'string') out[k] = v;
  return out;
}

export function workersPlatform(files: Record<string, string>, env: Record<string, string>): Platform {
  return {
    name: 'workers',
    listen: () => Promise.reject(new Error('Workers has no listeners: the platform calls the fetch handler')),
    // Workers sends no signals: a deployment moves new requests to new isolates and drains the old ones itself.
    onSignal: () => {},
    upstream: (o) => fetchUpstream(fetch, o),
    files: bundledFiles(files),
    env,
    writeLog: (line) => console.log(line),
    exit: () => {},
  };
}

/** The bundle as read-only files: the core's file source reads resources_file through this. */
function bundledFiles(files: Record<string, string>): PlatformFiles {
  const encoder = new TextEncoder();
  return {
    read: async (path) => {
      const text = files[normalizePath(path)];
      if (text === undefined) {
        throw new Error(`not bundled into the Worker (bundled: ${Object.keys(files).join(', ')})`);
      }
      return encoder.encode(text);
    },
    writeAtomic: () => Promise.reject(new Error('Workers has no writable files')),
  };
}

/** `examples/workers/../resources.yaml` → `examples/resources.yaml`, so bundle keys match resolved paths. */
export function normalizePath(path: string): string {
  const out: string[] = [];
  for (const seg of path.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..' && out.length > 0 && out[out.length - 1] !== '..') out.pop();
    else out.push(seg);
  }
  return (path.startsWith('/') ? '/' : '') + out.join('/');
}

async function boot(bundle: WorkerBundle, env: Record<string, string>, opts: WorkerOptions): Promise<Serve> {
  const platform = workersPlatform(bundle.files, env);
  const loaded = await loadBootConfig(platform, bundle.configPath, { listeners: false });
  if (typeof loaded === 'string') return broken(platform, loaded);
  const { config } = loaded;
  const unsupported = unsupportedOnWorkers(config);
  if (unsupported) return broken(platform, `config file ${bundle.configPath}: ${unsupported}`);

  let intervalMs = DEFAULT_ETCD_POLL_SECS * 1000;
  if (!config.resources_file) {
    const v = env[ETCD_POLL_VAR];
    if (v !== undefined) {
      const secs = Number(v.trim());
      if (!/^\d+(\.\d+)?$/.test(v.trim()) || !(secs > 0)) {
        return broken(platform, `${ETCD_POLL_VAR}: "${v}" is not a positive number of seconds`);
      }
      intervalMs = secs * 1000;
    }
  }

  let g: AssembledGateway<EtcdPollSource>;
  try {
    g = createGateway(config, platform, {
      ignoredKeys: loaded.ignoredKeys,
      backgroundChecks: false,
      admin: false,
      // Without a token the status routes are not mounted at all (the proxy's 404), like a disabled listener.
      status: config.observability.metrics.prometheus.enabled && env[STATUS_TOKEN_VAR] !== undefined &&
        env[STATUS_TOKEN_VAR] !== '',
      drain: false,
      etcd: (gw) => new EtcdPollSource(gw, { intervalMs, now: opts.now }),
    });
  } catch (e) {
    return broken(platform, (e as Error).message); // the poll source refuses an unusable etcd block
  }
  const { gw } = g;
  const meaningless = ignoredOnWorkers(config);
  if (meaningless.length > 0) gw.log.warn(LOG.ignoredOnWorkers, { keys: meaningless });
  const statusToken = env[STATUS_TOKEN_VAR];
  if (g.source.kind === 'etcd') return bootEtcd(g, g.source.etcd, intervalMs, statusToken);
  const file = g.source.file;
  const first = await file.load();
  // A bad resources file still serves: /readyz says 503 and /status/config says why (out_of_sync).
  if (first.ok) gw.log.info(MSG.resourcesLoaded, { file: file.path, resources: first.resources });
  else gw.log.error(LOG.resourcesFailed, { file: file.path, error: first.message });
  const checked = gw.snapshot ? checkedModels(gw.snapshot.resources.models) : [];
  if (checked.length > 0) gw.log.warn(LOG.noBackgroundChecks, { models: checked.map((m) => m.display_name) });
  gw.lifecycle.serve();
  return serve(g, statusToken);
}

/**
 * etcd mode: one range now (the first request waits for it), then a poll at most every `intervalMs`, on
 * a later request, in `ctx.waitUntil`. While nothing has been applied a due poll is awaited instead, so
 * the first configuration is served by the first request after it appears.
 */
async function bootEtcd(
  g: AssembledGateway<EtcdPollSource>,
  poller: EtcdPollSource,
  intervalMs: number,
  statusToken: string | undefined,
): Promise<Serve> {
  const { gw } = g;
  await poller.refresh();
  if (!gw.snapshot) gw.log.info(LOG.etcdWaiting, { interval_ms: intervalMs });
  gw.lifecycle.serve();
  const inner = serve(g, statusToken);
  const retryAfter = String(Math.max(1, Math.ceil(intervalMs / 1000)));
  return async (req, ctx) => {
    if (poller.due()) {
      const polled = poller.refresh();
      if (!gw.snapshot) await polled;
      else if (ctx) ctx.waitUntil(polled);
    }
    if (!gw.snapshot && new URL(req.url).pathname.startsWith('/v1/')) return notConfigured(req, retryAfter);
    return inner(req, ctx);
  };
}

/** `/v1/*` before the first etcd configuration: 503 in the caller's envelope (elsewhere: no listener). */
function notConfigured(req: Request, retryAfter: string): Response {
  const wire = new URL(req.url).pathname === '/v1/messages' ? 'anthropic' : 'openai';
  return errorResponse(errors.notConfigured(retryAfter), envelopeFor(wire));
}

/** What this runtime cannot do at all; a config asking for it is refused rather than half-served. */
function unsupportedOnWorkers(config: Config): string | undefined {
  if (config.managed.snapshot_cache_path) {
    return 'managed.snapshot_cache_path: Workers has no files to cache a snapshot in';
  }
  const t = config.etcd.tls;
  if (!config.resources_file && t && (t.ca_cert_file || t.client_cert_file || t.client_key_file)) {
    return 'etcd.tls: Workers cannot read certificate files nor present a client certificate; use an https:// endpoint with a publicly trusted certificate';
  }
  return undefined;
}

/** Listener settings that exist in the file but do nothing on the edge (Cloudflare terminates TLS). */
function ignoredOnWorkers(config: Config): string[] {
  const keys: string[] = [];
  if (config.admin.enabled) keys.push('admin');
  if (config.proxy.tls) keys.push('proxy.tls');
  if (config.proxy.http2) keys.push('proxy.http2');
  return keys;
}

/** No usable configuration: log why once per isolate and refuse every request (the Worker's "exit 1"). */
function broken(platform: Platform, report: string): Serve {
  platform.writeLog(
    JSON.stringify({ time: new Date().toISOString(), level: 'error', msg: LOG.configFailed, error: report }),
  );
  return async () =>
    new Response('sluice: the bundled configuration failed to load; see the Worker logs\n', {
      status: 503,
      headers: TEXT,
    });
}

function serve(g: AssembledGateway<EtcdPollSource>, statusToken: string | undefined): Serve {
  const { proxy, status } = g;
  const prom = g.gw.config.observability.metrics.prometheus;
  const statusPaths = new Set(['/status/ready', '/status/config', '/status/models', prom.path]);
  return async (req) => {
    if (status && statusToken && statusPaths.has(new URL(req.url).pathname)) {
      const given = parseBearer(req.headers.get('authorization'));
      if (given === undefined || !(await timingSafeEqual(given, statusToken))) return unauthorized();
      return status.fetch(req);
    }
    return proxy.fetch(req, connInfo(req));
  };
}

/** Cloudflare names the client in `cf-connecting-ip` (no port: the edge does not say). */
function connInfo(req: Request): ConnInfo {
  return { peer: req.headers.get('cf-connecting-ip') ?? undefined };
}

function unauthorized(): Response {
  return new Response(`unauthorized: the status routes need Authorization: Bearer <${STATUS_TOKEN_VAR}>\n`, {
    status: 401,
    headers: { ...TEXT, 'www-authenticate': 'Bearer realm="sluice-status"' },
  });
}
