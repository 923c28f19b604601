// The command line and `serve()` (docs/operations.md "Boot and lifecycle"): the shared boot (src/boot.ts),
// listeners bound in order, SIGHUP to the source's reload, the drain on SIGTERM/SIGINT.
import { type AssembledGateway, type BootConfig, bootGateway, loadFirst } from './boot.ts';
import { parseCli } from './cli.ts';
import { parseAddr } from './config/load.ts';
import type { Gateway } from './gateway.ts';
import { runDrain } from './lifecycle/drain.ts';
import { listenForSignals } from './lifecycle/signals.ts';
import type { Logger } from './observability/logger.ts';
import { MSG } from './observability/messages.ts';
import { warmTokenTables } from './providers/estimate.ts';
import type { Listener, ListenSpec, Platform, SignalName } from './platform.ts';
import { runExport } from './sources/etcd/export.ts';
import type { ConfigSource } from './sources/source.ts';
import { headerLimitRefusal } from './proxy/header-limit.ts';
import { runProbeTimeline } from './tools/probe-timeline.ts';
import { runSpend } from './tools/spend.ts';
import { printErr } from './tools/print.ts';
import { validateResources } from './tools/validate.ts';
import { validateConfig } from './tools/validate-config.ts';
import { VERSION } from './version.ts';

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
      return validateResources(platform, cmd.resourcesPath);
    case 'validate-config':
      return validateConfig(platform, cmd.configPath);
    case 'export':
      return runExport(platform, cmd);
    case 'serve':
      return serve(platform, cmd.configPath);
    case 'probe-timeline':
      return runProbeTimeline(platform, cmd);
    case 'spend':
      return runSpend(platform, cmd);
  }
}

/**
 * `sluice serve`: the shared boot (src/boot.ts) plus listeners and signals, in the order of
 * docs/operations.md "Boot and lifecycle". Returns the exit code.
 */
async function serve(platform: Platform, configPath: string): Promise<number> {
  const signals = listenForSignals(platform); // first: a signal during start-up exits promptly, binding nothing
  const booted = await bootGateway(platform, configPath);
  if (typeof booted === 'string') {
    printErr(platform, booted);
    return 1;
  }
  const { boot, g } = booted;
  const { gw, source } = g;
  if (signals.stopRequested) return stoppedDuringStartup(gw, signals.stopRequested);

  // A source read whole (the file) is loaded before any listener binds; one read in the background (etcd)
  // is started after status and admin bind, and the proxy waits for its first configuration.
  const loaded = await loadFirst(g);
  if (loaded && !loaded.ok) {
    printErr(platform, loaded.message);
    return 1;
  }
  if (loaded) signals.onHup(() => void source.reload());
  if (signals.stopRequested) return stoppedDuringStartup(gw, signals.stopRequested);

  const listeners = new Listeners(platform, gw.log);
  /** Leave before serving: background work, the source and whatever is bound all go. */
  const abandon = async (message?: string): Promise<void> => {
    if (message) printErr(platform, message);
    gw.stop();
    await source.stop();
    await listeners.closeAll();
  };
  const bindFailed = async (e: unknown): Promise<number> => {
    await abandon(`cannot bind: ${(e as Error).message}`);
    return 1;
  };

  try {
    await bindSideListeners(g, boot, listeners);
  } catch (e) {
    return bindFailed(e);
  }
  if (!loaded) {
    try {
      await probeProxyAddr(platform, boot);
    } catch (e) {
      return bindFailed(e);
    }
    signals.onHup(() => void source.reload());
    gw.lifecycle.waitForConfig();
    const stopped = await waitForFirstConfig(gw.log, source, signals.stopped);
    if (stopped) {
      await abandon();
      return stoppedDuringStartup(gw, stopped);
    }
  }
  if (signals.stopRequested) {
    await abandon();
    return stoppedDuringStartup(gw, signals.stopRequested);
  }

  try {
    gw.attachProxyListener(await bindProxy(g, boot, listeners));
  } catch (e) {
    return bindFailed(e);
  }
  gw.lifecycle.serve();
  // The tokenizer's table is built now, in slices, rather than on the first request that counts.
  warmTokenTables();

  await signals.stopped;
  signals.onHup(undefined);
  await runDrain(gw, signals, listeners.all);
  gw.stop();
  await source.stop();
  return 0;
}

/** The listeners bound so far, each logged as it binds; closed together on the way out. */
class Listeners {
  readonly all: Listener[] = [];
  constructor(private readonly platform: Platform, private readonly log: Logger) {}

  async bind(spec: ListenSpec, fetch: Parameters<Platform['listen']>[1]): Promise<Listener> {
    const l = await this.platform.listen(spec, fetch);
    this.all.push(l);
    this.log.info(MSG.listening, {
      listener: spec.name,
      addr: `${spec.host}:${l.port}`,
      tls: spec.tls !== undefined,
      http2: spec.http2 === true || spec.tls !== undefined,
    });
    return l;
  }

  async closeAll(): Promise<void> {
    await Promise.allSettled(this.all.map((l) => l.close()));
  }
}

/** Status, then admin: bound before the first configuration so an operator can see the wait. */
async function bindSideListeners(g: AssembledGateway, boot: BootConfig, listeners: Listeners): Promise<void> {
  const { config } = g.gw;
  const { status, admin } = g;
  if (status) {
    await listeners.bind(
      { name: 'status', ...parseAddr(config.observability.metrics.prometheus.addr) },
      (req) => status.fetch(req),
    );
  }
  if (admin) {
    await listeners.bind(
      { name: 'admin', ...parseAddr(config.admin.addr), ...(boot.adminTls ? { tls: boot.adminTls } : {}) },
      (req, conn) => admin.fetch(req, conn),
    );
  }
}

/**
 * etcd mode: the proxy address must be usable now, not when the first configuration arrives — bind it
 * once and let it go, so a port in use is a boot failure rather than a deferred one.
 */
async function probeProxyAddr(platform: Platform, boot: BootConfig): Promise<void> {
  const probe = await platform.listen({
    name: 'proxy',
    ...parseAddr(boot.config.proxy.addr),
    tls: boot.tls,
    http2: boot.config.proxy.http2,
  }, () => new Response(null, { status: 503 }));
  await probe.close();
}

async function bindProxy(g: AssembledGateway, boot: BootConfig, listeners: Listeners): Promise<Listener> {
  const { gw, proxy } = g;
  return await listeners.bind({
    name: 'proxy',
    ...parseAddr(boot.config.proxy.addr),
    tls: boot.tls,
    http2: boot.config.proxy.http2,
    idleTimeoutMs: boot.config.downstream.idle_timeout_secs * 1000,
    firstRequestTimeoutMs: boot.config.downstream.first_request_timeout_secs * 1000,
    headerLimits: {
      maxCount: boot.config.proxy.max_request_headers,
      maxBytes: boot.config.proxy.max_request_header_bytes,
      refuse: headerLimitRefusal(gw),
    },
    onDrainAccept: (peer, open) => {
      gw.lifecycle.recordConnection();
      gw.log.info(MSG.acceptedWhileDraining, { peer, open_connections: open });
    },
  }, (req, conn) => proxy.fetch(req, conn));
}

const STILL_WAITING_EVERY_MS = 10_000;

/**
 * With nothing applied the proxy stays unbound; INFO once, WARN every 10 s, INFO on apply. The first
 * successful read of the source is the first configuration, even of an empty prefix (docs/aisix-compatibility.md
 * docs/etcd.md: state `empty`, ready). Resolves undefined once a configuration is applied, or the signal that asked
 * to stop meanwhile.
 */
async function waitForFirstConfig(
  log: Logger,
  source: ConfigSource,
  stop: Promise<SignalName>,
): Promise<SignalName | undefined> {
  source.start();
  const first = source.firstApplied.then(() => undefined);
  // A usable snapshot cache applies before the source reads the network: wait for that before logging a wait.
  const local = source.localRestore ?? new Promise<void>((r) => setTimeout(r, 0));
  const quick = await Promise.race([first, stop, local.then(() => 'later' as const)]);
  if (quick !== 'later') {
    if (quick === undefined) log.info(MSG.firstConfigApplied);
    return quick;
  }
  log.info(MSG.waitingFirstConfig);
  const warn = setInterval(() => log.warn(MSG.stillNotBound), STILL_WAITING_EVERY_MS);
  try {
    const r = await Promise.race([first, stop]);
    if (r === undefined) log.info(MSG.firstConfigApplied);
    return r;
  } finally {
    clearInterval(warn);
  }
}

/** A stop signal before serving: nothing to drain. */
function stoppedDuringStartup(gw: Pick<Gateway, 'stop' | 'lifecycle' | 'log'>, signal: SignalName): number {
  gw.stop();
  gw.lifecycle.stop();
  gw.log.info(MSG.receivedSignal(signal));
  gw.log.info(MSG.shutDownCleanly);
  return 0;
}
