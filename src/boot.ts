// The boot every runtime shares (docs/operations.md "Boot and lifecycle"): `loadBootConfig` (config.yaml
// and every file the boot needs), `createGateway` (the Gateway, its apps, its configuration source),
// `bootGateway` (both, plus what a runtime refuses) and `loadFirst` (a source read whole, before binding).
// serve() (src/main.ts) adds listeners and signals; the Workers handler its bundle, polling and token.
import { createAdminApp } from './admin/app.ts';
import { adminWritesFor } from './admin/write-setup.ts';
import { spendRouteFor } from './admin/spend-route.ts';
import { loadConfig, parseAddr } from './config/load.ts';
import { type Config, DEFAULT_IDLE_TIMEOUT_SECS, DEFAULT_REQUEST_BODY_LIMIT_BYTES } from './config/schema.ts';
import { Gateway } from './gateway.ts';
import { registerDrainMetrics } from './lifecycle/drain-report.ts';
import { MSG } from './observability/messages.ts';
import { type ListenSpec, type Platform, readFile, type UpstreamTls } from './platform.ts';
import { createProxyApp } from './proxy/app.ts';
import { createEtcdSource, type EtcdSourceHost } from './sources/etcd/source.ts';
import { FileSource } from './sources/file.ts';
import type { ConfigSource, SourceLoad } from './sources/source.ts';
import { createStatusApp } from './status/app.ts';
import type { Clock } from './util/clock.ts';
import { refuseLocalModel } from './guardrails/local-model.ts';

const decoder = new TextDecoder();

export interface BootConfig {
  config: Config;
  /** Keys of config.yaml Sluice does not know (WARN at boot). */
  ignoredKeys: string[];
  /** The proxy listener's certificate and key, read before anything binds. */
  tls?: ListenSpec['tls'];
  /** The admin listener's (`admin.tls`), likewise. */
  adminTls?: ListenSpec['tls'];
  /** `upstream.tls` with its files read; absent when the section is. */
  upstreamTls?: UpstreamTls;
}

export interface BootConfigOptions {
  /**
   * Check what listeners need: ports in range, the proxy's TLS files (default true). Workers has no
   * listeners (the edge terminates TLS) and turns this off.
   */
  listeners?: boolean;
  /**
   * What this runtime cannot serve at all: the report refusing the configuration, or undefined. Asked before
   * the files the configuration names are read (a runtime may have none to read them from).
   */
  refuse?: (config: Config) => string | undefined;
}

/** Load and check config.yaml, then everything that must be usable before anything binds. */
export async function loadBootConfig(
  platform: Platform,
  path: string,
  opts: BootConfigOptions = {},
): Promise<BootConfig | string> {
  let text: string;
  try {
    text = decoder.decode(await readFile(platform, path));
  } catch (e) {
    return `config file ${path}: cannot read it: ${(e as Error).message}`;
  }
  const r = loadConfig(path, text, platform.env);
  if (!r.ok) return r.report.format();
  const config = r.config;
  const noModel = refuseLocalModel(platform.env);
  if (noModel !== undefined) return noModel;
  const refused = opts.refuse?.(config);
  if (refused !== undefined) return refused;
  try {
    const listeners = opts.listeners === false ? {} : await checkListeners(platform, path, config);
    if (typeof listeners === 'string') return listeners;
    await checkRedisTlsFiles(platform, config);
    const upstreamTls = await readUpstreamTls(platform, config.upstream.tls);
    return {
      config,
      ignoredKeys: r.ignoredKeys,
      tls: listeners.tls,
      adminTls: listeners.adminTls,
      ...(upstreamTls ? { upstreamTls } : {}),
    };
  } catch (e) {
    return `config file ${path}: ${(e as Error).message}`;
  }
}

/** Ports in range, and the listeners' certificates and keys read now; a string is the report. */
async function checkListeners(
  platform: Platform,
  path: string,
  config: Config,
): Promise<{ tls?: ListenSpec['tls']; adminTls?: ListenSpec['tls'] } | string> {
  for (const [name, addr] of listenerAddrs(config)) {
    const { port } = parseAddr(addr);
    if (port > 65535) return `config file ${path}: ${name}: port ${port} is out of range (0-65535)`;
  }
  const admin = config.admin.enabled ? config.admin.tls : undefined;
  if (!config.proxy.tls && !admin) return {};
  if (!platform.files) {
    return `${config.proxy.tls ? 'proxy' : 'admin'}.tls needs file access, which this runtime does not have`;
  }
  return {
    ...(config.proxy.tls ? { tls: await readListenerTls(platform, 'proxy', config.proxy.tls) } : {}),
    ...(admin ? { adminTls: await readListenerTls(platform, 'admin', admin) } : {}),
  };
}

async function readListenerTls(
  platform: Platform,
  name: 'proxy' | 'admin',
  { cert_file, key_file }: { cert_file: string; key_file: string },
): Promise<NonNullable<ListenSpec['tls']>> {
  return {
    cert: await readFor(platform, `${name}.tls.cert_file`, cert_file),
    key: await readFor(platform, `${name}.tls.key_file`, key_file),
    certFile: cert_file,
    keyFile: key_file,
  };
}

/** The Redis client reads its TLS files when the gateway is built: a bad path is a config error here. */
async function checkRedisTlsFiles(platform: Platform, config: Config): Promise<void> {
  if (!platform.redis) return;
  const rl = config.ratelimit.backend === 'redis' ? config.ratelimit.redis?.tls : undefined;
  for (const [section, t] of [['ratelimit', rl], ['cache', config.cache.redis?.tls]] as const) {
    if (!t) continue;
    const files = [['ca_file', t.ca_file], ['client_cert_file', t.client_cert_file], [
      'client_key_file',
      t.client_key_file,
    ]] as const;
    for (const [key, file] of files) if (file) await readFor(platform, `${section}.redis.tls.${key}`, file);
  }
}

/**
 * `upstream.tls`'s files, each checked for the PEM block it must hold, with AISIX's wording for a file that
 * cannot be read or holds no certificate; and the CA bundle `SSL_CERT_FILE` names, trusted for upstreams on
 * top of the runtime's roots and `ca_file` (none of the runtimes' clients reads that variable itself).
 */
async function readUpstreamTls(
  platform: Platform,
  t: Config['upstream']['tls'],
): Promise<UpstreamTls | undefined> {
  const read = async (what: string, file: string) => {
    try {
      return await readFile(platform, file);
    } catch (e) {
      throw new Error(`${what}: read ${file}: ${(e as Error).message}`);
    }
  };
  const pem = async (key: string, file: string | undefined, block: RegExp, what: string) => {
    if (file === undefined) return undefined;
    const bytes = await read(`upstream.tls.${key}`, file);
    if (!block.test(decoder.decode(bytes))) throw new Error(`upstream.tls.${key}: ${file} contains no ${what} block`);
    return bytes;
  };
  const certificate = /-----BEGIN CERTIFICATE-----/;
  const sslCertFile = platform.env.SSL_CERT_FILE;
  let system: Uint8Array | undefined;
  if (sslCertFile) {
    system = await read('SSL_CERT_FILE (fix the path or unset it)', sslCertFile);
    if (!certificate.test(decoder.decode(system))) {
      throw new Error(`SSL_CERT_FILE: ${sslCertFile} contains no CERTIFICATE block (fix the path or unset it)`);
    }
  }
  if (!t) return system ? { verify: true, ca: system } : undefined;
  const own = await pem('ca_file', t.ca_file, certificate, 'CERTIFICATE');
  const ca = own && system ? joinPem(system, own) : own ?? system;
  const cert = await pem('client_cert_file', t.client_cert_file, certificate, 'CERTIFICATE');
  const key = await pem('client_key_file', t.client_key_file, /-----BEGIN [A-Z ]*PRIVATE KEY-----/, 'PRIVATE KEY');
  return { verify: t.verify, ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}) };
}

/** Two PEM bundles as one, a newline between them (a file may not end with one). */
function joinPem(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + 1 + b.length);
  out.set(a);
  out[a.length] = 10;
  out.set(b, a.length + 1);
  return out;
}

async function readFor(platform: Platform, key: string, file: string): Promise<Uint8Array> {
  try {
    return await readFile(platform, file);
  } catch (e) {
    throw new Error(`${key}: cannot read ${file}: ${(e as Error).message}`);
  }
}

function listenerAddrs(c: Config): [string, string][] {
  const out: [string, string][] = [['proxy.addr', c.proxy.addr]];
  if (c.admin.enabled) out.push(['admin.addr', c.admin.addr]);
  if (c.observability.metrics.prometheus.enabled) {
    out.push(['observability.metrics.prometheus.addr', c.observability.metrics.prometheus.addr]);
  }
  return out;
}

export interface CreateGatewayOptions {
  ignoredKeys?: readonly string[];
  /** `upstream.tls` with its files read (`BootConfig.upstreamTls`). */
  upstreamTls?: UpstreamTls;
  /** The gateway's one clock (default the system's); tests inject one. */
  clock?: Clock;
  /** Background model checks (default true); off where no work outlives a request (Workers). */
  backgroundChecks?: boolean;
  /** The admin app (default: `admin.enabled`); Workers does not mount it. */
  admin?: boolean;
  /** The status app (default: `observability.metrics.prometheus.enabled`). */
  status?: boolean;
  /** Register the drain families (default true); Workers has no drain of its own. */
  drain?: boolean;
  /** etcd mode: the source to read with (default the watch source); Workers passes range polling. */
  etcd?: (host: EtcdSourceHost) => ConfigSource;
}

export interface AssembledGateway {
  gw: Gateway;
  proxy: ReturnType<typeof createProxyApp>;
  status: ReturnType<typeof createStatusApp> | undefined;
  admin: ReturnType<typeof createAdminApp> | undefined;
  /** The resources file, or the etcd source (`opts.etcd`'s, or the watch source). */
  source: ConfigSource;
}

/** The Gateway, its apps and its configuration source; nothing is read, bound or started yet. */
export function createGateway(config: Config, platform: Platform, opts: CreateGatewayOptions = {}): AssembledGateway {
  const gw = new Gateway(config, platform, {
    backgroundChecks: opts.backgroundChecks,
    clock: opts.clock,
    upstreamTls: opts.upstreamTls,
  });
  if (opts.drain !== false) registerDrainMetrics(gw.metrics.registry, gw.lifecycle, config.shutdown.min_drain_secs);
  if (opts.ignoredKeys && opts.ignoredKeys.length > 0) gw.log.warn(MSG.ignoredKeys, { keys: opts.ignoredKeys });
  if (opts.upstreamTls?.verify === false) gw.log.warn(MSG.upstreamTlsUnverified);
  const path = config.resources_file;
  const source = path ? new FileSource(path, gw) : opts.etcd ? opts.etcd(gw) : createEtcdSource(gw);
  const proxy = createProxyApp(gw);
  return {
    gw,
    proxy,
    status: (opts.status ?? config.observability.metrics.prometheus.enabled) ? createStatusApp(gw) : undefined,
    admin: (opts.admin ?? config.admin.enabled)
      ? createAdminApp(gw, proxy, [adminWritesFor(gw), spendRouteFor(gw)], gw)
      : undefined,
    source,
  };
}

export interface BootOptions extends BootConfigOptions, Omit<CreateGatewayOptions, 'ignoredKeys' | 'upstreamTls'> {}

const LOG = {
  noListeners: 'config keys that mean nothing on Workers are ignored',
  noBackgroundChecks:
    'background_model_check does not run on Workers (no work outside a request); these models are judged by caller traffic only',
} as const;

export interface Booted {
  boot: BootConfig;
  g: AssembledGateway;
}

/**
 * The boot every runtime shares, up to its first configuration: config.yaml and the files it names
 * (`loadBootConfig`), what the runtime refuses, then the assembly (`createGateway`). A string is the report
 * of a configuration that cannot boot; nothing is bound or started.
 */
export async function bootGateway(
  platform: Platform,
  configPath: string,
  opts: BootOptions = {},
): Promise<Booted | string> {
  const boot = await loadBootConfig(platform, configPath, opts);
  if (typeof boot === 'string') return boot;
  let g: AssembledGateway;
  try {
    g = createGateway(boot.config, platform, {
      ...opts,
      ignoredKeys: boot.ignoredKeys,
      upstreamTls: boot.upstreamTls,
    });
  } catch (e) {
    // A custom etcd source (range polling) refuses an unusable block by throwing; anything else is a bug.
    if (!opts.etcd) throw e;
    return (e as Error).message;
  }
  try {
    await g.gw.cache.connect();
  } catch (e) {
    g.gw.stop();
    return (e as Error).message;
  }
  const meaningless = opts.listeners === false ? listenerKeys(boot.config) : [];
  if (meaningless.length > 0) g.gw.log.warn(LOG.noListeners, { keys: meaningless });
  warnUnbounded(g.gw, boot.config, opts.listeners !== false);
  return { boot, g };
}

/**
 * Only an explicit 0 reaches here (the defaults are finite): AISIX's "no bound", kept, and said once. The idle
 * timeout means nothing without listeners.
 */
function warnUnbounded(gw: Gateway, config: Config, listeners: boolean): void {
  if (config.proxy.request_body_limit_bytes === 0) {
    gw.log.warn(MSG.bodyLimitUnbounded, {
      key: 'proxy.request_body_limit_bytes',
      default: DEFAULT_REQUEST_BODY_LIMIT_BYTES,
    });
  }
  if (listeners && config.downstream.idle_timeout_secs === 0) {
    gw.log.warn(MSG.idleTimeoutUnbounded, { key: 'downstream.idle_timeout_secs', default: DEFAULT_IDLE_TIMEOUT_SECS });
  }
}

/** Listener settings that exist in the file but do nothing without listeners (the edge terminates TLS). */
function listenerKeys(config: Config): string[] {
  const keys: [string, unknown][] = [
    ['admin', config.admin.enabled],
    ['proxy.tls', config.proxy.tls],
    ['proxy.http2', config.proxy.http2],
  ];
  return keys.filter(([, on]) => on).map(([k]) => k);
}

/**
 * The first load of a source read whole (the file), before anything binds; undefined for a source read in
 * the background. Its success is logged; where background model checks are off, so are the models they
 * would have judged. What a failure means is the runtime's (serve(): exit 1; Workers: 503 until redeployed).
 */
export async function loadFirst(g: AssembledGateway): Promise<SourceLoad | undefined> {
  const first = await g.source.load?.();
  const { gw } = g;
  const checked = first?.ok && !gw.backgroundChecks && gw.snapshot ? gw.snapshot.checkedModels : [];
  if (checked.length > 0) gw.log.warn(LOG.noBackgroundChecks, { models: checked.map((m) => m.display_name) });
  return first;
}

/**
 * A boot that cannot serve on a runtime with no process to exit (Workers): one ERROR line with the whole
 * report, in the gateway's log format, then every request answers 503 with `body`.
 */
export function unbootable(platform: Platform, msg: string, report: string, body: string): () => Promise<Response> {
  platform.writeLog(JSON.stringify({ time: new Date().toISOString(), level: 'error', msg, error: report }));
  return async () =>
    new Response(body, {
      status: 503,
      headers: { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' },
    });
}
