// What `Deno.serve` does with the connection facts Sluice's listener contract rests on (src/platform.ts
// `ListenSpec`, `Listener`), each printed as one line; docs/performance.md "`Deno.serve` and Deno's fetch, measured: not bound" reads them.
// Run: node_modules/.bin/deno run -A bench/deno-serve-probe.ts
import * as net from 'node:net';

// The few Deno APIs used, declared here so that the Node type check of bench/ passes (as in bare-proxy.ts).
declare const Deno: {
  version: { deno: string };
  serve(
    options: { hostname: string; port: number; onListen(): void },
    handler: (req: Request) => Response | Promise<Response>,
  ): { addr: { port: number }; shutdown(): Promise<void> };
};

/** How long a connection must stay open to count as "kept". */
const KEPT_MS = 3000;

const server = Deno.serve({ hostname: '127.0.0.1', port: 0, onListen() {} }, async (req) => {
  if (req.body) await req.text();
  return new Response('ok', { headers: { connection: 'close' } });
});
const port = server.addr.port;

interface Raw {
  socket: net.Socket;
  received(): string;
  /** 'fin', or the error code that ended the connection. */
  ended: Promise<string>;
}

function open(): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => data += d);
    const ended = new Promise<string>((r) => {
      socket.once('end', () => r('fin'));
      socket.once('error', (e: NodeJS.ErrnoException) => r(e.code ?? e.message));
    });
    socket.once('connect', () => resolve({ socket, received: () => data, ended }));
    socket.once('error', reject);
  });
}

/** What ended the connection within `ms`, or 'still open'. */
function endedWithin(raw: Raw, ms: number): Promise<string> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const open = new Promise<string>((r) => timer = setTimeout(() => r(`still open after ${ms} ms`), ms));
  return Promise.race([raw.ended, open]).finally(() => clearTimeout(timer));
}

const send = (raw: Raw, text: string) =>
  new Promise<string>((r) =>
    raw.socket.write(text, (e) => r(e ? (e as NodeJS.ErrnoException).code ?? e.message : 'sent'))
  );
const statusLine = (text: string) => text.split('\r\n')[0] || '(nothing)';
const answers = (raw: Raw) => (raw.received().match(/HTTP\/1\.1 \d{3} /g) ?? []).length;
const GET = 'GET / HTTP/1.1\r\nhost: x\r\n\r\n';
const fields = (n: number) => Array.from({ length: n }, (_, i) => `x-h${i}: v\r\n`).join('');

async function statusFor(head: string): Promise<string> {
  const raw = await open();
  await send(raw, head);
  const end = await endedWithin(raw, 1000);
  raw.socket.destroy();
  return `${statusLine(raw.received())} (${end})`;
}

console.log(`Deno ${Deno.version.deno}, Deno.serve on 127.0.0.1:${port}`);

const answered = await open();
await send(answered, GET);
console.log(`after an answer with "connection: close": ${await endedWithin(answered, KEPT_MS)}`);
await send(answered, GET);
await endedWithin(answered, 500);
console.log(`a second request on that connection: ${answers(answered) === 2 ? 'answered' : 'not answered'}`);

for (const n of [127, 128, 129, 200]) {
  console.log(`${n} request header fields: ${await statusFor(`GET / HTTP/1.1\r\n${fields(n)}\r\n`)}`);
}
for (const kib of [60, 70]) {
  console.log(
    `a ${kib} KiB head: ${await statusFor(`GET / HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(kib * 1024)}\r\n\r\n`)}`,
  );
}

const silent = await open();
console.log(`a connection that sends nothing: ${await endedWithin(silent, KEPT_MS)}`);

const half = await open();
await send(half, 'POST / HTTP/1.1\r\nhost');
await new Promise((r) => setTimeout(r, 100));
const shutdown = server.shutdown();
await new Promise((r) => setTimeout(r, 100));
const rest = await send(half, ': x\r\ncontent-length: 2\r\n\r\nhi');
console.log(
  `shutdown(), a request head half sent before it: the rest ${rest}, answer ${statusLine(half.received())}, ` +
    `${await endedWithin(half, KEPT_MS)}`,
);
console.log(`shutdown(), the answered connection: ${await endedWithin(answered, KEPT_MS)}`);
console.log(`shutdown(), the silent connection: ${await endedWithin(silent, KEPT_MS)}`);
await shutdown;
