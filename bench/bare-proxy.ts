// The ceiling a Hono proxy reaches on each runtime here: one POST /v1/chat/completions route that forwards
// the request body to the mock upstream and returns its body. No auth, routing, metrics or logs, so the
// difference to a Sluice row of the same runtime is what Sluice itself costs.
//
//   node --import tsx bench/bare-proxy.ts --port N --upstream http://127.0.0.1:M   # @hono/node-server + undici.request (keep-alive Agent)
//   bun bench/bare-proxy.ts …                                                      # Bun.serve(app.fetch) + global fetch
//   deno run -A bench/bare-proxy.ts …                                              # Deno.serve(app.fetch) + global fetch
//
//   … --listener node   on Bun or Deno: bind through their node:http layer (@hono/node-server), the listener
//                       Sluice uses there for its drain guarantees, to separate the listener's cost from Sluice's
//   … --client undici   on Deno: undici.request instead of fetch (what Sluice uses on Deno)
//   … --framework none  on Node: a plain node:http handler and undici.request, no Hono: the ceiling of any
//                       Node proxy built on these two here
//   … --framework relay on Node: a TCP relay to the upstream (node:net, no HTTP parsed): the cost of the hop
//                       itself, the floor of any proxy on this machine
//   … --burden kind:n   synthetic work per request on the Hono route (bench/burden.ts), its time served at
//                       GET /burden
//   … --contract        the Hono route does what AISIX's per-request contract asks (bench/contract-floor.ts):
//                       the contract's floor, called with Sluice's bench key and model
//
// Prints `bare-proxy listening <port> <runtime>` once bound. Talks only to 127.0.0.1.
import { type Context, Hono } from 'hono';
import { burden, timed } from './burden.ts';
import { contractCall } from './contract-floor.ts';
import { flag, has } from './flags.ts';

declare const Bun: {
  serve(o: { port: number; hostname: string; fetch: (r: Request) => Response | Promise<Response> }): unknown;
} | undefined;
declare const Deno: {
  serve(
    o: { port: number; hostname: string; onListen?: () => void },
    h: (r: Request) => Response | Promise<Response>,
  ): unknown;
} | undefined;

const PORT = Number(flag('port'));
const UPSTREAM = `${flag('upstream').replace(/\/$/, '')}/v1/chat/completions`;
const HOST = '127.0.0.1';
const runtime = typeof Bun !== 'undefined' ? 'bun' : typeof Deno !== 'undefined' ? 'deno' : 'node';

/** `stream`: hand back the upstream's body as it arrives (SSE) instead of reading it whole. */
type Forward = (
  body: ArrayBuffer | string,
  authorization: string,
  stream: boolean,
) => Promise<{ status: number; body: ArrayBuffer | ReadableStream<Uint8Array> }>;

async function nodeForward(): Promise<Forward> {
  // The same client and Agent settings as Sluice's Node runtime (runtimes/undici-upstream.ts), and its call:
  // the pool's own `request` (undici's top-level one copies the options into an object of a new shape each time).
  const { Agent } = await import('undici');
  const agent = new Agent({ keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  const { origin, pathname } = new URL(UPSTREAM);
  return async (body, authorization, stream) => {
    const res = await agent.request({
      origin,
      path: pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization },
      body: typeof body === 'string' ? body : Buffer.from(body),
    });
    if (!stream) return { status: res.statusCode, body: await res.body.arrayBuffer() };
    // Pulled chunk by chunk, as Sluice's pump does.
    const it = res.body[Symbol.asyncIterator]();
    return {
      status: res.statusCode,
      body: new ReadableStream<Uint8Array>({
        async pull(c) {
          const r = await it.next();
          if (r.done) c.close();
          else c.enqueue(r.value);
        },
        cancel: () => void res.body.destroy(),
      }, { highWaterMark: 0 }),
    };
  };
}

const fetchForward: Forward = async (body, authorization, stream) => {
  const res = await fetch(UPSTREAM, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization },
    body,
  });
  return { status: res.status, body: stream && res.body ? res.body : await res.arrayBuffer() };
};

const isStream = (body: ArrayBuffer) => new TextDecoder().decode(body).includes('"stream":true');

const forward = runtime === 'node' || flag('client', 'fetch') === 'undici' ? await nodeForward() : fetchForward;

const extra = flag('burden', '') === '' ? undefined : timed(burden(flag('burden')));

async function contractRoute(c: Context): Promise<Response> {
  const a = await contractCall(
    c.req.header('authorization') ?? '',
    c.req.header('user-agent') ?? '',
    await c.req.text(),
    (body, authorization) => forward(body, authorization, false) as Promise<{ status: number; body: ArrayBuffer }>,
  );
  return c.body(a.text, a.status as 200, a.headers);
}

const app = new Hono();
app.get('/readyz', (c) => c.text('ok')); // for the /readyz-under-load scenario
app.get('/burden', (c) => c.json(extra?.spent ?? null)); // bench/burden-socket.ts reads it around each run
// One route either way: two handlers on one path would take Hono off its one-handler path.
app.post(
  '/v1/chat/completions',
  has('contract') ? contractRoute : async (c) => {
    const body = await c.req.arrayBuffer();
    const held = extra === undefined ? undefined : await extra.before();
    const r = await forward(body, c.req.header('authorization') ?? '', isStream(body));
    if (extra !== undefined) extra.after(held);
    if (r.body instanceof ReadableStream) {
      return c.body(r.body, r.status as 200, { 'content-type': 'text/event-stream' });
    }
    // A Uint8Array, not the ArrayBuffer: @hono/node-server writes string and Uint8Array bodies straight to the
    // socket but turns anything else into a full web Response and a ReadableStream (~40% of this proxy's
    // throughput on Node, measured: 14.1k -> ~20k req/s at JSON/50).
    return c.body(new Uint8Array(r.body), r.status as 200, { 'content-type': 'application/json' });
  },
);

const ready = () => console.log(`bare-proxy listening ${PORT} ${runtime}`);
// A normal exit on SIGTERM, so `--cpu-prof` writes its profile (`npm run bench -- --profile-bare`).
if (runtime !== 'deno') process.once('SIGTERM', () => process.exit(0));
if (flag('framework', 'hono') === 'relay') {
  const net = await import('node:net');
  const to = new URL(flag('upstream'));
  net.createServer((caller) => {
    const upstream = net.connect(Number(to.port), to.hostname);
    caller.setNoDelay(true);
    upstream.setNoDelay(true);
    caller.pipe(upstream);
    upstream.pipe(caller);
    caller.on('error', () => upstream.destroy());
    upstream.on('error', () => caller.destroy());
  }).listen(PORT, HOST, ready);
} else if (flag('framework', 'hono') === 'none') {
  const http = await import('node:http');
  http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/readyz') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
      return;
    }
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      const all = Buffer.concat(parts);
      const body = all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength);
      forward(body, req.headers.authorization ?? '', isStream(body)).then(async (r) => {
        if (r.body instanceof ReadableStream) {
          res.writeHead(r.status, { 'content-type': 'text/event-stream' });
          const reader = r.body.getReader();
          for (let c = await reader.read(); !c.done; c = await reader.read()) res.write(c.value);
          res.end();
          return;
        }
        res.writeHead(r.status, { 'content-type': 'application/json', 'content-length': r.body.byteLength });
        res.end(new Uint8Array(r.body));
      }, () => {
        res.writeHead(502);
        res.end();
      });
    });
  }).listen(PORT, HOST, ready);
} else if (flag('listener', 'native') === 'node') {
  const { serve } = await import('@hono/node-server');
  serve({ fetch: app.fetch, port: PORT, hostname: HOST }, ready);
} else if (runtime === 'bun') {
  Bun!.serve({ port: PORT, hostname: HOST, fetch: app.fetch });
  ready();
} else if (runtime === 'deno') {
  Deno!.serve({ port: PORT, hostname: HOST, onListen: ready }, app.fetch);
} else {
  const { serve } = await import('@hono/node-server');
  serve({ fetch: app.fetch, port: PORT, hostname: HOST }, ready);
}
