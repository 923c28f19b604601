// The gateway's whole life, identical on every runtime with listeners: parse the command line, load the
// configuration, bind listeners in the order of SPEC §6, reload on SIGHUP, drain on SIGTERM/SIGINT.
import { createAdminApp } from './admin/app.ts';
import { parseCli, USAGE } from './cli.ts';
import { loadConfig, parseAddr } from './config/load.ts';
import type { Config } from './config/schema.ts';
import { Gateway } from './gateway.ts';
import { runDrain } from './lifecycle/drain.ts';
import { registerDrainMetrics } from './lifecycle/drain-report.ts';
import { MSG } from './observability/messages.ts';
import type { Listener, ListenSpec, Platform, SignalName } from './platform.ts';
import { createProxyApp } from './proxy/app.ts';
import { loadResourcesFile } from './resources/pipeline.ts';
import { runExport } from './sources/etcd/export.ts';
import { createEtcdSource } from './sources/etcd/source.ts';
import { loadFromFile, reloadFile } from './sources/file.ts';
import type { ConfigSource } from './sources/source.ts';
import { createStatusApp } from './status/app.ts';
import { runProbeTimeline } from './tools/probe-timeline.ts';
import { VERSION } from './version.ts';

const decoder = new TextDecoder();

/** Print to stderr as-is (reports are multi-line and meant for a person). */
function printErr(p: Platform, text: string): void {
  for (const line of text.split('\n')) p.writeLog(line);
}

export async function main(platform: Platform, argv: readonly string[]): Promise<number> {
  const cmd = parseCli(argv, platform.env);
  switch (cmd.kind) {
    case 'help':
      printErr(platform, cmd.text);
      return 0;
    case 'version':
      printErr(platform, `sluice ${VERSION} (${platform.name})`);
      return 0;
    case 'error':
      printErr(platform, cmd.message);
      return 2;
    case 'validate':
      return validate(platform, cmd.resourcesPath);
    case 'export':
      return runExport(platform, cmd);
    case 'serve':
      return serve(platform, cmd.configPath);
    case 'probe-timeline':
      return runProbeTimeline(platform, cmd);
  }
}

async function readText(platform: Platform, path: string): Promise<string> {
  if (!platform.files) throw new Error('this runtime has no file access');
  return decoder.decode(await platform.files.read(path));
}

async function validate(platform: Platform, path: string): Promise<number> {
  let text: string;
  try {
    text = await readText(platform, path);
  } catch (e) {
    printErr(platform, `resources file ${path}: cannot read it: ${(e as Error).message}`);
    return 1;
  }
  const r = await loadResourcesFile(path, text, platform.env);
  if (!r.ok) {
    printErr(platform, r.report.format());
    return 1;
  }
  // AISIX: the OK line on stdout, the report (above) on stderr.
  const ok = `OK: ${path} loaded ${r.resourceCount} resource(s)`;
  if (platform.writeOut) platform.writeOut(`${ok}\n`);
  else printErr(platform, ok);
  return 0;
}

/** Load and check config.yaml, then everything that must be usable before anything binds. */
export async function loadBootConfig(
  platform: Platform,
  path: string,
): Promise<{ config: Config; ignoredKeys: string[]; tls?: ListenSpec['tls'] } | string> {
  let text: string;
  try {
    text = await readText(platform, path);
  } catch (e) {
    return `config file ${path}: cannot read it: ${(e as Error).message}`;
  }
  const r = loadConfig(path, text, platform.env);
  if (!r.ok) return r.report.format();
  const config = r.config;
  for (const [name, addr] of listenerAddrs(config)) {
    const { port } = parseAddr(addr);
    if (port > 65535) return `config file ${path}: ${name}: port ${port} is out of range (0-65535)`;
  }
  let tls: ListenSpec['tls'];
  if (config.proxy.tls) {
    const { cert_file, key_file } = config.proxy.tls;
    const files = platform.files;
    if (!files) return 'proxy.tls needs file access, which this runtime does not have';
    const read = async (f: string, what: string) => {
      try {
        return await files.read(f);
      } catch (e) {
        throw new Error(`proxy.tls.${what}: cannot read ${f}: ${(e as Error).message}`);
      }
    };
    try {
      tls = {
        cert: await read(cert_file, 'cert_file'),
        key: await read(key_file, 'key_file'),
        certFile: cert_file,
        keyFile: key_file,
      };
    } catch (e) {
      return `config file ${path}: ${(e as Error).message}`;
    }
  }
  return { config, ignoredKeys: r.ignoredKeys, tls };
}

function listenerAddrs(c: Config): [string, string][] {
  const out: [string, string][] = [['proxy.addr', c.proxy.addr]];
  if (c.admin.enabled) out.push(['admin.addr', c.admin.addr]);
  if (c.observability.metrics.prometheus.enabled) {
    out.push(['observability.metrics.prometheus.addr', c.observability.metrics.prometheus.addr]);
  }
  return out;
}

async function serve(platform: Platform, configPath: string): Promise<number> {
  // Signals first: one arriving during start-up must exit promptly, without binding anything.
  let stopRequested: SignalName | undefined;
  let onStop: ((s: SignalName) => void) | undefined;
  for (const s of ['SIGTERM', 'SIGINT'] as const) {
    platform.onSignal(s, () => {
      if (onStop) onStop(s);
      else stopRequested ??= s;
    });
  }
  let onHup: (() => void) | undefined;
  platform.onSignal('SIGHUP', () => onHup?.());

  const boot = await loadBootConfig(platform, configPath);
  if (typeof boot === 'string') {
    printErr(platform, boot);
    return 1;
  }
  const { config } = boot;
  const gw = new Gateway(config, platform);
  registerDrainMetrics(gw.metrics.registry, gw.lifecycle, config.shutdown.min_drain_secs);
  if (boot.ignoredKeys.length > 0) gw.log.warn(MSG.ignoredKeys, { keys: boot.ignoredKeys });
  if (stopRequested) return stoppedDuringStartup(gw, stopRequested);

  // File mode: the file is loaded before any listener binds (SPEC §5.1); etcd mode waits after binding
  // status and admin (SPEC §6.3).
  if (config.resources_file) {
    const r = await loadFromFile(gw, config.resources_file);
    if (!r.ok) {
      printErr(platform, r.message);
      return 1;
    }
    gw.log.info(MSG.resourcesLoaded, { file: config.resources_file, resources: r.resources });
    onHup = () => void reloadFile(gw, config.resources_file!);
  }
  if (stopRequested) return stoppedDuringStartup(gw, stopRequested);

  const listeners: Listener[] = [];
  const bind = async (spec: ListenSpec, fetch: Parameters<Platform['listen']>[1]): Promise<Listener> => {
    const l = await platform.listen(spec, fetch);
    listeners.push(l);
    gw.log.info(MSG.listening, {
      listener: spec.name,
      addr: `${spec.host}:${l.port}`,
      tls: spec.tls !== undefined,
      http2: spec.http2 === true || spec.tls !== undefined,
    });
    return l;
  };
  let source: ConfigSource | undefined;
  /** Leave before serving: background work, the source and whatever is bound all go. */
  const abandon = async (message?: string): Promise<void> => {
    if (message) printErr(platform, message);
    gw.stop();
    await source?.stop();
    await Promise.allSettled(listeners.map((l) => l.close()));
  };
  try {
    const prom = config.observability.metrics.prometheus;
    if (prom.enabled) {
      const app = createStatusApp(gw);
      await bind({ name: 'status', ...parseAddr(prom.addr) }, (req) => app.fetch(req));
    }
    if (config.admin.enabled) {
      const app = createAdminApp(gw);
      await bind({ name: 'admin', ...parseAddr(config.admin.addr) }, (req) => app.fetch(req));
    }
  } catch (e) {
    await abandon(`cannot bind: ${(e as Error).message}`);
    return 1;
  }

  if (!config.resources_file) {
    // The proxy address must be usable now, not when the first configuration arrives (SPEC §6.3):
    // bind it once and let it go, so a port in use is a boot failure rather than a deferred one.
    try {
      const probe = await platform.listen({
        name: 'proxy',
        ...parseAddr(config.proxy.addr),
        tls: boot.tls,
        http2: config.proxy.http2,
      }, () => new Response(null, { status: 503 }));
      await probe.close();
    } catch (e) {
      await abandon(`cannot bind: ${(e as Error).message}`);
      return 1;
    }
    onHup = () => gw.log.info(MSG.sighupIgnoredEtcd);
    source = createEtcdSource(gw);
    gw.lifecycle.waitForConfig();
    const stopped = await waitForFirstConfig(gw, source, () => stopRequested, (resolve) => {
      onStop = resolve;
    });
    if (stopped) {
      await abandon();
      return stoppedDuringStartup(gw, stopped);
    }
    onStop = undefined;
  }
  if (stopRequested) {
    await abandon();
    return stoppedDuringStartup(gw, stopRequested);
  }

  try {
    const proxyApp = createProxyApp(gw);
    gw.proxyListener = await bind({
      name: 'proxy',
      ...parseAddr(config.proxy.addr),
      tls: boot.tls,
      http2: config.proxy.http2,
      onDrainAccept: (peer, open) => {
        gw.lifecycle.recordConnection();
        gw.log.info(MSG.acceptedWhileDraining, { peer, open_connections: open });
      },
    }, (req, conn) => proxyApp.fetch(req, conn));
  } catch (e) {
    await abandon(`cannot bind: ${(e as Error).message}`);
    return 1;
  }
  gw.lifecycle.serve();

  const signal = stopRequested ?? (await new Promise<SignalName>((resolve) => {
    onStop = resolve;
  }));
  onHup = undefined;
  await runDrain(gw, signal, listeners);
  gw.stop();
  await source?.stop();
  return 0;
}

const STILL_WAITING_EVERY_MS = 10_000;

/**
 * SPEC §6.3: with nothing applied the proxy stays unbound; INFO once, WARN every 10 s, INFO on apply.
 * The first successful read of the source is the first configuration, even of an empty prefix
 * (aisix-contract.md §1 E: state `empty`, ready). Resolves undefined once a configuration is applied, or
 * the signal that asked to stop meanwhile.
 */
async function waitForFirstConfig(
  gw: Gateway,
  source: ConfigSource,
  pending: () => SignalName | undefined,
  listen: (resolve: (s: SignalName) => void) => void,
): Promise<SignalName | undefined> {
  const stop = new Promise<SignalName>((resolve) => {
    const already = pending();
    if (already) resolve(already);
    else listen(resolve);
  });
  source.start();
  let waitingLogged = false;
  const first = source.firstApplied.then(() => undefined);
  // A usable snapshot cache applies before the source reads the network: wait for that before logging a wait.
  const local = source.localRestore ?? new Promise<void>((r) => setTimeout(r, 0));
  const quick = await Promise.race([first, stop, local.then(() => 'later' as const)]);
  if (quick !== 'later') {
    if (quick === undefined) gw.log.info(MSG.firstConfigApplied);
    return quick;
  }
  gw.log.info(MSG.waitingFirstConfig);
  waitingLogged = true;
  const warn = setInterval(() => gw.log.warn(MSG.stillNotBound), STILL_WAITING_EVERY_MS);
  try {
    const r = await Promise.race([first, stop]);
    if (r === undefined && waitingLogged) gw.log.info(MSG.firstConfigApplied);
    return r;
  } finally {
    clearInterval(warn);
  }
}

function stoppedDuringStartup(gw: Gateway, signal: SignalName): number {
  gw.stop();
  gw.lifecycle.stop();
  gw.log.info(MSG.receivedSignal(signal));
  gw.log.info(MSG.shutDownCleanly);
  return 0;
}

export { USAGE };
