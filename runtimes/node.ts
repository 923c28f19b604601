// Node entrypoint: implements the Platform contract with node:http(s)/http2, undici and node:fs, then
// hands over to the runtime-agnostic core. Started by bin/sluice from the esbuild bundle.
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { isMainThread } from 'node:worker_threads';
import { Agent, fetch as undiciFetch } from 'undici';
import { main } from '../src/main.ts';
import { keyMapsByString } from '../src/util/sharded-map.ts';
import { batchedSink } from '../src/observability/log-sink.ts';
import type { Platform } from '../src/platform.ts';
import { lazyRedisClient } from './redis-lazy.ts';
import { nodeFiles } from './node-files.ts';
import { nodeListen } from './node-listener.ts';
import { connectWebSocket } from './node-websocket.ts';
import { yamlThread } from './yaml-thread.ts';
import { type ExtraCa, undiciUpstream } from './undici-upstream.ts';
import { nodeSha256Stream } from './node-sha256.ts';
import { nodeGzip } from './node-gzip.ts';

export function nodePlatform(): Platform {
  const logs = batchedSink((text) => void process.stderr.write(text), setImmediate);
  process.on('exit', () => logs.flush());
  return {
    name: 'node',
    listen: nodeListen,
    onSignal: (signal, handler) => void process.on(signal, handler),
    upstream: (o) => undiciUpstream(o, nodeExtraCa()),
    files: nodeFiles,
    parseYamlOffThread: yamlThread({ keepWorker: false }),
    sha256Stream: nodeSha256Stream,
    gzip: nodeGzip,
    // 0 is V8's own growth rule; the bound is not kept for good, as it costs every request a little.
    boundHeapGrowth: (on) => setFlagsFromString(`--heap-growing-percent=${on ? 50 : 0}`),
    env: process.env,
    writeLog: (line) => logs.write(line),
    writeOut: (text) => void process.stdout.write(text),
    fetchWithTls: nodeFetchWithTls,
    redis: lazyRedisClient,
    connectWebSocket,
    exit: (code) => {
      logs.flush();
      process.exit(code);
    },
  };
}

/**
 * The V8 flags the gateway sets on itself, for the V8 of `v8Version` (`process.versions.v8`). From V8 12 (Node
 * 22 and later), Maglev's finished compilations are freed on the main thread: left to V8's background threads,
 * which the compilations themselves keep busy, their memory piles up while the gateway warms (docs/performance.md
 * "Node 24"). Node refuses the flag in NODE_OPTIONS, so the process sets it; Node 20's V8 does not know it.
 */
export function selfV8Flags(v8Version: string): string[] {
  return Number.parseInt(v8Version, 10) >= 12 ? ['--no-maglev-destroy-on-background'] : [];
}

/** Set `selfV8Flags` on this process's V8. */
export function applySelfV8Flags(): void {
  for (const flag of selfV8Flags(process.versions.v8)) setFlagsFromString(flag);
}

/** Run the CLI with this process's arguments; bin/sluice calls this from the bundle. */
export function start(): void {
  applySelfV8Flags();
  // Node 20's V8 keeps a Map's string keys out of its string table (docs/performance.md "Configuration at scale").
  if (Number.parseInt(process.versions.v8, 10) < 12) keyMapsByString();
  const platform = nodePlatform();
  main(platform, process.argv.slice(2)).then((code) => platform.exit(code), (e) => {
    process.stderr.write(`sluice: fatal: ${(e as Error)?.stack ?? String(e)}\n`);
    platform.exit(1);
  });
}

// A worker thread (runtimes/yaml-thread.ts) loads this module too, with its own file as argv[1].
if (isMainThread && import.meta.url === `file://${process.argv[1]}`) start();

/**
 * The etcd source's TLS (private CA, client certificate): undici's fetch through an Agent carrying the
 * PEM material. No body timeout: the watch stream is idle for long stretches and runs its own watchdog.
 */
export function nodeFetchWithTls(tls: { ca?: Uint8Array; cert?: Uint8Array; key?: Uint8Array }): typeof fetch {
  const pem = (b: Uint8Array | undefined) => (b ? Buffer.from(b).toString('utf8') : undefined);
  const agent = new Agent({ connect: { ca: pem(tls.ca), cert: pem(tls.cert), key: pem(tls.key) }, bodyTimeout: 0 });
  // undici's fetch and the DOM `fetch` type describe the same WHATWG function with different type packages.
  return ((input: Parameters<typeof fetch>[0], init?: RequestInit) =>
    undiciFetch(input as never, { ...(init as object), dispatcher: agent } as never)) as unknown as typeof fetch;
}

/**
 * The NODE_EXTRA_CA_CERTS file, for an upstream client given its own CA: node adds that file to its default
 * roots but not to `tls.rootCertificates`, which an explicit `ca` starts from. Unreadable: node warned at start.
 */
function nodeExtraCa(): ExtraCa | undefined {
  const file = process.env.NODE_EXTRA_CA_CERTS;
  if (!file) return undefined;
  try {
    return { pem: readFileSync(file, 'utf8'), inDefaults: true };
  } catch {
    return undefined;
  }
}
