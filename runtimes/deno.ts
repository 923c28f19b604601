// Deno entrypoint: Deno.serve behind the core's Platform contract. `deno run -A runtimes/deno.ts --config x`.
import { main } from '../src/main.ts';
import type { FetchHandler, ListenSpec, Listener, Platform } from '../src/platform.ts';
import { fetchUpstream } from '../src/upstream-fetch.ts';

async function denoListen(spec: ListenSpec, fetch: FetchHandler): Promise<Listener> {
  let draining = false;
  const { promise: listening, resolve } = Promise.withResolvers<void>();
  const opts = {
    hostname: spec.host,
    port: spec.port,
    onListen: () => resolve(),
    ...(spec.tls ? { cert: new TextDecoder().decode(spec.tls.cert), key: new TextDecoder().decode(spec.tls.key) } : {}),
  };
  const server = Deno.serve(opts, async (req: Request, info: Deno.ServeHandlerInfo<Deno.NetAddr>) => {
    const a = info.remoteAddr;
    const peer = a.hostname.includes(':') ? `[${a.hostname}]:${a.port}` : `${a.hostname}:${a.port}`;
    const res = await fetch(req, { peer });
    // Deno sends the header; it keeps the socket until shutdown() (see the README's runtime table).
    if (draining) res.headers.set('connection', 'close');
    return res;
  });
  await listening;
  return {
    port: server.addr.port,
    beginDrain() { draining = true; },
    openConnections: () => undefined,
    async close() { await server.shutdown(); },
  };
}

function denoPlatform(): Platform {
  return {
    name: 'deno',
    listen: denoListen,
    onSignal: (signal, handler) => Deno.addSignalListener(signal, handler),
    upstream: () => fetchUpstream(fetch),
    files: {
      read: (p) => Deno.readFile(p),
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
    writeLog: (line) => void Deno.stderr.writeSync(new TextEncoder().encode(`${line}\n`)),
    exit: (code) => Deno.exit(code),
  };
}

const platform = denoPlatform();
main(platform, Deno.args).then((code) => platform.exit(code), (e) => {
  console.error(`sluice: fatal: ${(e as Error)?.stack ?? String(e)}`);
  platform.exit(1);
});
