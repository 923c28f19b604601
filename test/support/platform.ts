// A Platform for unit tests through app.request(): no listeners, upstream over the real global fetch (so
// adapters still talk HTTP to a mock upstream), files from an in-memory map, log lines captured.
import type { Platform } from '../../src/platform.ts';
import { Lifecycle, type Phase } from '../../src/lifecycle/state.ts';
import { fetchUpstream } from '../../src/upstream-fetch.ts';
import { loadConfig } from '../../src/config/load.ts';
import { Gateway } from '../../src/gateway.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { sha256Hex } from '../../src/util/crypto.ts';
import { parseLogLine } from './log-line.ts';

export interface TestPlatform extends Platform {
  logs: Record<string, unknown>[];
  fileMap: Map<string, string>;
}

export function testPlatform(env: Record<string, string | undefined> = {}): TestPlatform {
  const logs: Record<string, unknown>[] = [];
  const fileMap = new Map<string, string>();
  return {
    name: 'test',
    logs,
    fileMap,
    listen: () => Promise.reject(new Error('the test platform does not listen')),
    onSignal: () => {},
    upstream: () => fetchUpstream(),
    files: {
      read: async (p) => {
        const v = fileMap.get(p);
        if (v === undefined) throw new Error(`ENOENT: no such file or directory, open '${p}'`);
        return new TextEncoder().encode(v);
      },
      writeAtomic: async (p, d) => {
        fileMap.set(p, new TextDecoder().decode(d));
      },
    },
    env,
    writeLog: (line) => {
      logs.push(parseLogLine(line) ?? { raw: line });
    },
    exit: () => {},
  };
}

export const BASE_CONFIG = `
resources_file: resources.yaml
proxy: { addr: "127.0.0.1:0" }
admin: { addr: "127.0.0.1:0", admin_keys: [admin-secret-1] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
`;

/**
 * A clock that reads the middle of a minute when made and runs at real speed, for tests whose requests share a
 * per-minute rate-limit window (`rpm`, `tpm`, a minute policy): the gateway's fixed windows start on the
 * minute, so with the real clock two requests of one test could fall either side of a boundary. A file's
 * requests take seconds, far less than the half minute left.
 */
export function midMinute(): () => Date {
  const shift = 30_000 - (Date.now() % 60_000);
  return () => new Date(Date.now() + shift);
}

/** A Gateway with `resources` applied, ready for app.request(). */
export async function gatewayWith(
  resources: string,
  opts: { config?: string; env?: Record<string, string>; now?: () => Date; redis?: Platform['redis'] } = {},
): Promise<{ gw: Gateway; platform: TestPlatform }> {
  const platform = testPlatform(opts.env ?? {});
  if (opts.redis) platform.redis = opts.redis; // a real Redis for the integration tests
  const c = loadConfig('/t/config.yaml', opts.config ?? BASE_CONFIG, platform.env);
  if (!c.ok) throw new Error(c.report.format());
  const now = opts.now;
  const clock = now ? () => now().getTime() : undefined;
  const gw = new Gateway(c.config, platform, { clock, lifecycle: new SteeredLifecycle(clock) });
  const r = await loadResourcesFile('/t/resources.yaml', resources, platform.env);
  if (!r.ok) throw new Error(r.report.format());
  gw.apply(r.snapshot, { configHash: await sha256Hex(resources) });
  gw.lifecycle.serve();
  return { gw, platform };
}

/**
 * A Lifecycle whose phase a test can set regardless of the diagram (a shared gateway toggled into `draining`
 * and back to `serving`), handed to the Gateway through its `lifecycle` option. Until `force`d, and again
 * once forced back to the phase it really is in, it is the plain Lifecycle.
 */
export class SteeredLifecycle extends Lifecycle {
  private forced: Phase | undefined;

  force(phase: Phase): void {
    this.forced = undefined;
    if (phase !== super.phase) this.forced = phase;
  }

  override get phase(): Phase {
    return this.forced ?? super.phase;
  }
}

/**
 * Put a test gateway in `phase` regardless of the lifecycle diagram (a test that checks draining behaviour,
 * then restores `serving` for the next test). The gateway must have been built with a SteeredLifecycle, as
 * gatewayWith() does; production code moves the phase through Lifecycle's methods, which refuse an illegal
 * transition.
 */
export function forcePhase(gw: Gateway, phase: Phase): void {
  const lifecycle = gw.lifecycle;
  if (!(lifecycle instanceof SteeredLifecycle)) {
    throw new Error('forcePhase: build the gateway with { lifecycle: new SteeredLifecycle() } (gatewayWith does)');
  }
  lifecycle.force(phase);
}
