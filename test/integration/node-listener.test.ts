// The node:http listener's streamed responses (docs/performance.md "A streamed answer's head and first chunk in
// one write"): a head whose first chunk is at hand leaves with it in one write, and a head whose body has nothing
// yet still reaches the caller before the first chunk does.
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { test } from 'node:test';
import * as tls from 'node:tls';
import { nodeListen } from '../../runtimes/node-listener.ts';
import type { FetchHandler, ListenSpec } from '../../src/platform.ts';
import { makePki } from '../support/tls.ts';

const enc = new TextEncoder();
const REQUEST = 'GET /stream HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n';

/** A listener on a free port answering every request with `body`, a stream of text/event-stream. */
async function serve(body: () => ReadableStream<Uint8Array>, tlsSpec?: ListenSpec['tls']) {
  const fetch: FetchHandler = () => new Response(body(), { headers: { 'content-type': 'text/event-stream' } });
  return await nodeListen({ name: 'proxy', host: '127.0.0.1', port: 0, ...(tlsSpec ? { tls: tlsSpec } : {}) }, fetch);
}

/** A body whose first chunk is there at the first read. */
const atHand = () =>
  new ReadableStream<Uint8Array>({
    pull(c) {
      c.enqueue(enc.encode('data: first\n\n'));
      c.close();
    },
  }, { highWaterMark: 0 });

/**
 * What the server handed the socket of `client`'s connection, write by write (a corked batch is one): the caller
 * here shares the server's thread, so its reads cannot show how the server's bytes were split. `_writeGeneric` is
 * what net.Socket's `_write` and `_writev` both call.
 */
function serverWrites(client: () => net.Socket | undefined): { writes: string[]; restore(): void } {
  type WriteGeneric = (writev: boolean, data: unknown, encoding: string, cb: (e?: Error) => void) => void;
  const proto = net.Socket.prototype as unknown as { _writeGeneric: WriteGeneric };
  const original = proto._writeGeneric;
  const writes: string[] = [];
  const text = (d: unknown) => typeof d === 'string' ? d : Buffer.from(d as Uint8Array).toString('latin1');
  proto._writeGeneric = function (this: net.Socket, writev, data, encoding, cb) {
    const c = client();
    if (c && this !== c && this.remotePort === c.localPort) {
      writes.push(writev ? (data as { chunk: unknown }[]).map((w) => text(w.chunk)).join('') : text(data));
    }
    return original.call(this, writev, data, encoding, cb);
  };
  return { writes, restore: () => void (proto._writeGeneric = original) };
}

/** A raw HTTP/1.1 exchange: every `data` event's text, in order; `onData` sees each as it comes. */
function exchange(
  port: number,
  onData: (text: string) => void = () => {},
  onSocket: (s: net.Socket) => void = () => {},
  ca?: string,
): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const reads: string[] = [];
    const socket = ca
      ? tls.connect({ port, host: '127.0.0.1', ca, ALPNProtocols: ['http/1.1'] }, () => socket.write(REQUEST))
      : net.connect(port, '127.0.0.1', () => socket.write(REQUEST));
    onSocket(socket);
    socket.setEncoding('latin1');
    socket.on('data', (text: string) => {
      reads.push(text);
      onData(text);
    });
    socket.on('end', () => resolve(reads));
    socket.on('error', reject);
  });
}

for (const secure of [false, true]) {
  test(`a streamed head whose first chunk is at hand goes out with it in one write (${secure ? 'TLS, HTTP/1.1' : 'cleartext'})`, async () => {
    const pki = secure ? makePki() : undefined;
    const spec = pki &&
      { cert: enc.encode(pki.cert), key: enc.encode(pki.key), certFile: pki.certFile, keyFile: pki.keyFile };
    const listener = await serve(atHand, spec);
    let client: net.Socket | undefined;
    const spy = serverWrites(() => client);
    try {
      await exchange(listener.port, undefined, (s) => client = s, pki?.ca);
      const first = spy.writes.find((w) => w.startsWith('HTTP/1.1')) ?? '';
      assert.match(first, /^HTTP\/1\.1 200 OK\r\n/);
      assert.ok(first.includes('data: first\n\n'), `the head went out alone: ${JSON.stringify(spy.writes)}`);
    } finally {
      spy.restore();
      await listener.close();
    }
  });
}

test('a streamed head whose body has nothing yet reaches the caller before the first chunk', async () => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => release = resolve);
  const listener = await serve(() =>
    new ReadableStream({
      async pull(c) {
        await released; // the first chunk waits for the caller to have the head
        c.enqueue(enc.encode('data: late\n\n'));
        c.close();
      },
    }, { highWaterMark: 0 })
  );
  try {
    let head = '';
    const reads = await exchange(listener.port, (text) => {
      head += text;
      if (head.includes('\r\n\r\n')) release();
    });
    const whole = reads.join('');
    assert.match(whole, /^HTTP\/1\.1 200 OK\r\n/);
    assert.ok(whole.includes('data: late\n\n'));
    assert.ok(!reads[0]!.includes('data: late'), 'the head came with the chunk it could not have waited for');
  } finally {
    await listener.close();
  }
});
