// Node entrypoint: implements the Platform contract with node:http(s)/http2, undici and node:fs, then
// hands over to the runtime-agnostic core. Started by bin/sluice from the esbuild bundle.
import { Agent, request } from 'undici';
import { main } from '../src/main.ts';
import type { Platform, UpstreamFetch } from '../src/platform.ts';
import { nodeFiles } from './node-files.ts';
import { nodeListen } from './node-listener.ts';

/** undici's `request` (about 1.9× the global fetch on a proxy here), behind the core's UpstreamFetch. */
export function undiciUpstream(connectTimeoutMs: number): UpstreamFetch {
  const agent = new Agent({ connect: { timeout: connectTimeoutMs || undefined }, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  return async (r) => {
    const res = await request(r.url, { method: r.method, headers: r.headers, body: r.body, signal: r.signal, dispatcher: agent });
    return {
      status: res.statusCode,
      header: (name) => {
        const v = res.headers[name];
        return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
      },
      body: res.body,
      text: () => res.body.text(),
      discard: () => res.body.dump().then(() => {}),
    };
  };
}

export function nodePlatform(): Platform {
  return {
    name: 'node',
    listen: nodeListen,
    onSignal: (signal, handler) => void process.on(signal, handler),
    upstream: (o) => undiciUpstream(o.connectTimeoutMs),
    files: nodeFiles,
    env: process.env,
    writeLog: (line) => void process.stderr.write(`${line}\n`),
    exit: (code) => process.exit(code),
  };
}

/** Run the CLI with this process's arguments; bin/sluice calls this from the bundle. */
export function start(): void {
  const platform = nodePlatform();
  main(platform, process.argv.slice(2)).then((code) => platform.exit(code), (e) => {
    process.stderr.write(`sluice: fatal: ${(e as Error)?.stack ?? String(e)}\n`);
    platform.exit(1);
  });
}

if (import.meta.url === `file://${process.argv[1]}`) start();
