// Bun entrypoint: Bun.serve behind the core's Platform contract. `bun runtimes/bun.ts --config x`.
import { open, readFile, rename } from 'node:fs/promises';
import { main } from '../src/main.ts';
import type { FetchHandler, ListenSpec, Listener, Platform } from '../src/platform.ts';
import { fetchUpstream } from '../src/upstream-fetch.ts';

async function bunListen(spec: ListenSpec, fetch: FetchHandler): Promise<Listener> {
  let draining = false;
  const server = Bun.serve({
    hostname: spec.host,
    port: spec.port,
    tls: spec.tls ? { cert: new TextDecoder().decode(spec.tls.cert), key: new TextDecoder().decode(spec.tls.key) } : undefined,
    async fetch(req, srv) {
      const ip = srv.requestIP(req);
      const peer = ip ? (ip.family === 'IPv6' ? `[${ip.address}]:${ip.port}` : `${ip.address}:${ip.port}`) : undefined;
      const res = await fetch(req, { peer, httpVersion: '1.1' });
      // Bun closes the connection after a response that carries `Connection: close`.
      if (draining) res.headers.set('connection', 'close');
      return res;
    },
  });
  return {
    port: server.port ?? spec.port,
    beginDrain() { draining = true; },
    openConnections: () => undefined,
    async close() { await server.stop(); },
  };
}

export function bunPlatform(): Platform {
  return {
    name: 'bun',
    listen: bunListen,
    onSignal: (signal, handler) => void process.on(signal, handler),
    upstream: () => fetchUpstream(fetch),
    files: {
      read: (p) => readFile(p),
      async writeAtomic(p, data) {
        const tmp = `${p}.tmp-${process.pid}`;
        const fh = await open(tmp, 'w', 0o600);
        try { await fh.writeFile(data); await fh.sync(); } finally { await fh.close(); }
        await rename(tmp, p);
      },
    },
    env: process.env,
    writeLog: (line) => void process.stderr.write(`${line}\n`),
    exit: (code) => process.exit(code),
  };
}

const platform = bunPlatform();
main(platform, process.argv.slice(2)).then((code) => platform.exit(code), (e) => {
  process.stderr.write(`sluice: fatal: ${(e as Error)?.stack ?? String(e)}\n`);
  platform.exit(1);
});
