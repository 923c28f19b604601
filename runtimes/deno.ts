// Deno entrypoint: `deno run <DENO_RUN_FLAGS> runtimes/deno.ts --config x` (the flags: runtimes/deno-launch.ts).
// Listeners use Deno's node:http/node:http2, which keep the drain guarantees Deno.serve cannot (README
// "Runtimes"); the upstream client is undici, as on Node (runtimes/undici-upstream.ts).
import { main } from '../src/main.ts';
import type { Platform } from '../src/platform.ts';
import { lazyRedisClient } from './redis-lazy.ts';
import { undiciUpstream } from './undici-upstream.ts';
import { batchedSink } from '../src/observability/log-sink.ts';
import { nodeListen } from './node-listener.ts';
import { connectWebSocket } from './node-websocket.ts';
import { yamlThread } from './yaml-thread.ts';
import { nodeSha256Stream } from './node-sha256.ts';
import { nodeGzip } from './node-gzip.ts';

function denoPlatform(): Platform {
  const upstreamCa = extraCa();
  const logs = batchedSink((text) => writeAll(Deno.stderr, new TextEncoder().encode(text)), setImmediate);
  return {
    name: 'deno',
    listen: (spec, fetch) => nodeListen(spec, fetch, { reparseUpgrades: false }),
    onSignal: (signal, handler) => Deno.addSignalListener(signal, handler),
    upstream: (o) => undiciUpstream(o, upstreamCa ? { pem: upstreamCa, inDefaults: false } : undefined),
    files: {
      read: (p) => Deno.readFile(p),
      async openRead(p) {
        const f = await Deno.open(p);
        return {
          read: async (into) => (await f.read(into)) ?? 0,
          close: async () => f.close(),
        };
      },
      async writeAtomic(p, data) {
        const tmp = `${p}.tmp-${Deno.pid}`;
        const f = await Deno.open(tmp, { write: true, create: true, truncate: true, mode: 0o600 });
        try {
          let off = 0;
          while (off < data.length) off += await f.write(data.subarray(off));
          await f.sync();
        } finally {
          f.close();
        }
        await Deno.rename(tmp, p);
      },
    },
    env: Deno.env.toObject(),
    parseYamlOffThread: yamlThread({ keepWorker: true }),
    sha256Stream: nodeSha256Stream,
    gzip: nodeGzip,
    redis: lazyRedisClient,
    // Deno's node:http hands upgrades to the listener as Node's does; `ws` opens the upstream with its headers.
    connectWebSocket,
    writeLog: (line) => logs.write(line),
    writeOut: (text) => void Deno.stdout.writeSync(new TextEncoder().encode(text)),
    // Deno's fetch takes a client carrying the TLS material.
    fetchWithTls: (tls) => {
      const pem = (b: Uint8Array | undefined) => (b ? new TextDecoder().decode(b) : undefined);
      const ca = pem(tls.ca);
      const client = Deno.createHttpClient({ caCerts: ca ? [ca] : undefined, cert: pem(tls.cert), key: pem(tls.key) });
      return ((input: RequestInfo | URL, init?: RequestInit) =>
        fetch(input, { ...init, client } as RequestInit)) as typeof fetch;
    },
    exit: (code) => {
      logs.flush();
      Deno.exit(code);
    },
  };
}

let platform: Platform;
try {
  platform = denoPlatform();
} catch (e) {
  console.error(`sluice: ${(e as Error).message}`);
  Deno.exit(1);
}
main(platform, Deno.args).then((code) => platform.exit(code), (e) => {
  console.error(`sluice: fatal: ${(e as Error)?.stack ?? String(e)}`);
  platform.exit(1);
});

/**
 * DENO_CERT (Deno's own variable for a CA file to trust) for the upstream client: Deno's fetch honours it, but
 * undici connects through node:tls, which does not.
 */
function extraCa(): string | undefined {
  const file = Deno.env.get('DENO_CERT');
  if (!file) return undefined;
  try {
    return Deno.readTextFileSync(file);
  } catch (e) {
    throw new Error(`DENO_CERT=${file} cannot be read (${(e as Error).message}); fix the path or unset DENO_CERT`);
  }
}

/** writeSync may write less than asked (a pipe that is nearly full): loop until every byte is out. */
function writeAll(w: { writeSync(p: Uint8Array): number }, data: Uint8Array): void {
  let off = 0;
  while (off < data.length) off += w.writeSync(data.subarray(off));
}
