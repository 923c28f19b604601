// The Cloudflare Workers fetch handler (docs/workers.md): the shared boot (src/boot.ts) around this platform
// (bundled files; bindings arrive with the first request, so the gateway is built then, once per isolate),
// etcd range polling on its own schedule, and the status routes behind a bearer token. Apart from
// runtimes/workers.ts, which imports the bundled `.yaml`, so tests run this handler on Node.
import { type AssembledGateway, bootGateway, loadFirst, unbootable } from '../src/boot.ts';
import type { Config } from '../src/config/schema.ts';
import type { Gateway } from '../src/gateway.ts';
import { parseBearer, timingSafeEqual } from '../src/http/auth.ts';
import { envelopeFor, errorResponse, errors } from '../src/http/errors.ts';
import { bundledFiles, type Platform } from '../src/platform.ts';
import { approximateTokenCounts } from '../src/providers/estimate.ts';
import { wireOf } from '../src/proxy/routes.ts';
import { EtcdPollSource, pollIntervalMs } from '../src/sources/etcd/poll.ts';
import { fetchUpstream } from '../src/upstream-fetch.ts';

/** The Worker secret (or var) holding the bearer token of the status routes; unset = routes not mounted. */
export const STATUS_TOKEN_VAR = 'SLUICE_STATUS_TOKEN';
/** The Worker var with the etcd poll interval in seconds (etcd mode); default 10. */
export const ETCD_POLL_VAR = 'SLUICE_ETCD_POLL_SECS';

/** Files bundled at build time by the path the config names them with (`configPath`, its `resources_file`). */
export interface WorkerBundle {
  configPath: string;
  files: Record<string, string>;
}
/** The Worker's env bindings: vars and secrets are strings; other bindings (KV, R2 …) are ignored. */
export type WorkerEnv = Record<string, unknown>;
/** The part of the ExecutionContext used here: etcd polls and trace deliveries run in `waitUntil`. */
export type WorkerContext = { waitUntil(promise: Promise<unknown>): void };
/** `now`: the poll schedule's clock (Unix ms), for tests that step past the interval; default the gateway's. */
export type WorkerOptions = { now?: () => number };
type Serve = (req: Request, ctx?: WorkerContext) => Promise<Response>;
type Live = { ctx?: WorkerContext };
const TEXT = { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' };

const LOG = {
  configFailed: 'bundled configuration failed to load — every request answers 503 until a fixed version is deployed',
  resourcesFailed: 'bundled resources file failed to load — /readyz answers 503 until a fixed version is deployed',
  etcdWaiting: 'no etcd configuration yet — /readyz and /v1/* answer 503 until the first key appears under the prefix',
} as const;

/**
 * The module-worker shape (`export default { fetch }`); a boot that threw (a bug) is retried next request.
 * Workers cancels a request's own I/O when its caller disconnects, so work other requests share runs in the
 * waitUntil of the request that started it.
 */
export function createWorker(bundle: WorkerBundle, opts: WorkerOptions = {}) {
  // A tokenizer table costs more CPU to build than a Worker's request may spend (docs/workers.md).
  approximateTokenCounts();
  let booted: Promise<Serve> | undefined;
  const live: Live = {}; // the latest request's context: its `waitUntil` keeps the isolate alive
  return {
    async fetch(req: Request, env: WorkerEnv, ctx?: WorkerContext): Promise<Response> {
      if (ctx) live.ctx = ctx;
      if (!booted) {
        booted = boot(bundle, env, opts, live).catch((e: unknown) => {
          booted = undefined;
          throw e;
        });
        // Other requests wait on this boot: in waitUntil, its I/O outlives this caller's disconnect.
        ctx?.waitUntil(booted.catch(() => {}));
      }
      return (await booted)(req, ctx);
    },
  };
}

export function workersPlatform(files: Record<string, string>, env: Record<string, string>, live: Live): Platform {
  return {
    name: 'workers',
    listen: () => Promise.reject(new Error('Workers has no listeners: the platform calls the fetch handler')),
    onSignal: () => {}, // a deployment moves new requests to new isolates and drains the old ones itself
    upstream: (o) => fetchUpstream(fetch, o),
    files: bundledFiles(files, { missing: 'not bundled into the Worker', readOnly: 'Workers has no writable files' }),
    env,
    writeLog: (line) => console.log(line),
    exit: () => {},
    waitUntil: (work) => live.ctx?.waitUntil(work.catch(() => {})),
  };
}

async function boot(bundle: WorkerBundle, bindings: WorkerEnv, opts: WorkerOptions, live: Live): Promise<Serve> {
  const strings = Object.entries(bindings ?? {}).filter((e): e is [string, string] => typeof e[1] === 'string');
  const env = Object.fromEntries(strings);
  const platform = workersPlatform(bundle.files, env, live);
  const interval = pollIntervalMs(ETCD_POLL_VAR, env[ETCD_POLL_VAR]);
  const token = env[STATUS_TOKEN_VAR] || undefined;
  let poller: EtcdPollSource | undefined;
  const booted = await bootGateway(platform, bundle.configPath, {
    listeners: false,
    refuse: (c) => refused(bundle.configPath, c, interval),
    backgroundChecks: false,
    admin: false,
    status: token === undefined ? false : undefined, // no token: not mounted (the proxy's 404), like no listener
    drain: false,
    etcd: (gw) => (poller = new EtcdPollSource(gw, { intervalMs: interval as number, now: opts.now })), // refused unless a number
  });
  const sorry = 'sluice: the bundled configuration failed to load; see the Worker logs\n';
  if (typeof booted === 'string') return unbootable(platform, LOG.configFailed, booted, sorry); // the "exit 1"
  const { gw } = booted.g;
  const gated = statusGate(booted.g, token);
  if (poller) return pollSchedule(gw, poller, gated);
  const first = await loadFirst(booted.g);
  // A bad resources file still serves: /readyz says 503 and /status/config says why (out_of_sync).
  if (first && !first.ok) gw.log.error(LOG.resourcesFailed, { file: gw.config.resources_file, error: first.message });
  gw.lifecycle.serve();
  return gated;
}

/** etcd mode: one range now (the first request waits for it), then at most one per interval, on a request. */
async function pollSchedule(gw: Gateway, poller: EtcdPollSource, inner: Serve): Promise<Serve> {
  await poller.refresh();
  if (!gw.snapshot) gw.log.info(LOG.etcdWaiting, { interval_ms: poller.intervalMs });
  gw.lifecycle.serve();
  const retryAfter = String(Math.max(1, Math.ceil(poller.intervalMs / 1000)));
  return async (req, ctx) => {
    await poller.beforeRequest(ctx && ((read) => ctx.waitUntil(read)));
    if (gw.snapshot) return inner(req, ctx);
    const path = new URL(req.url).pathname;
    if (!path.startsWith('/v1/')) return inner(req, ctx);
    // `/v1/*` before the first configuration: 503 in the caller's envelope (elsewhere: no listener).
    return errorResponse(errors.notConfigured(retryAfter), envelopeFor(wireOf(path)));
  };
}

/** What this runtime cannot do at all; a config asking for it is refused rather than half-served. */
function refused(configPath: string, config: Config, pollInterval: number | string): string | undefined {
  const at = `config file ${configPath}`;
  if (config.managed.snapshot_cache_path) {
    return `${at}: managed.snapshot_cache_path: Workers has no files to cache a snapshot in`;
  }
  const u = config.upstream.tls;
  if (u && (u.ca_file || u.client_cert_file || !u.verify)) {
    return `${at}: upstream.tls: Workers' fetch trusts only the public roots, always verifies and cannot present a client certificate; remove upstream.tls and give the upstream a publicly trusted certificate (or serve it from Node, Bun or Deno)`;
  }
  if (config.resources_file) return undefined;
  const t = config.etcd.tls;
  if (t && (t.ca_cert_file || t.client_cert_file || t.client_key_file)) {
    return `${at}: etcd.tls: Workers cannot read certificate files nor present a client certificate; use an https:// endpoint with a publicly trusted certificate`;
  }
  return typeof pollInterval === 'string' ? pollInterval : undefined;
}

/** The status routes behind the bearer token; everything else to the proxy app. */
function statusGate(g: AssembledGateway, token?: string): Serve {
  const { proxy, status } = g;
  const prom = g.gw.config.observability.metrics.prometheus;
  const paths = new Set(['/status/ready', '/status/config', '/status/models', prom.path]);
  return async (req) => {
    if (status && token && paths.has(new URL(req.url).pathname)) {
      const given = parseBearer(req.headers.get('authorization'));
      if (given !== undefined && await timingSafeEqual(given, token)) return status.fetch(req);
      return new Response(`unauthorized: the status routes need Authorization: Bearer <${STATUS_TOKEN_VAR}>\n`, {
        status: 401,
        headers: { ...TEXT, 'www-authenticate': 'Bearer realm="sluice-status"' },
      });
    }
    // Cloudflare names the client in `cf-connecting-ip` (no port: the edge does not say).
    return proxy.fetch(req, { peer: req.headers.get('cf-connecting-ip') ?? undefined });
  };
}
