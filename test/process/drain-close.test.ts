// Black-box, on Node, Bun and Deno, HTTP/1.1 and h2c: the end of a drain (listeners closing) loses no request.
// A connection whose request head is half sent when the listeners close is served (with Connection: close),
// a connection that never sent a byte is closed cleanly (FIN, no reset), an idle pooled one is closed at once,
// and the process exits 0. The order is driven by the gateway's own log lines: `drain complete — closing
// listeners` is written in the same tick as the listeners' close(), so once it is seen, close() has run.
// Run: node build.mjs && node --import tsx --test test/process/drain-close.test.ts
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { after, describe, test } from 'node:test';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { CALLER_KEY, resourcesFor, type RuntimeName, spawnGateway } from '../support/process.ts';
import { within } from '../support/until.ts';

const CHAT = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] });
const HEAD = `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${CALLER_KEY}\r\n` +
  `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(CHAT)}\r\n\r\n`;

/** A raw connection that records what it receives and how it ended (FIN, reset, or still open). */
interface Raw {
  socket: net.Socket;
  received(): string;
  /** Resolves with 'fin' when the peer ended the connection cleanly, or with the error code. */
  ended: Promise<string>;
}

function connect(port: number): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      data += d;
    });
    const ended = new Promise<string>((r) => {
      socket.once('end', () => r('fin'));
      socket.once('error', (e: NodeJS.ErrnoException) => r(e.code ?? e.message));
    });
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve({ socket, received: () => data, ended });
    });
    socket.once('error', reject);
  });
}

describe('the listeners close without losing a request (node, bun, deno)', { concurrency: true }, () => {
  const mocks: MockUpstream[] = [];
  after(async () => {
    await Promise.all(mocks.map((m) => m.close()));
  });
  for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
    for (const http2 of [false, true]) {
      test(`${runtime}${http2 ? ', h2c port' : ''}: a half-sent request is served, a silent connection gets a clean FIN, an idle one closes, exit 0`, async () => {
        const mock = await startMockUpstream();
        mocks.push(mock);
        const g = await spawnGateway({
          runtime,
          config: `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}", http2: ${http2} }
admin: { enabled: false }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 1 }
`,
          files: { 'resources.yaml': resourcesFor(mock.base) },
          env: { CALLER_KEY },
        });
        try {
          await g.waitReady('/readyz', 'proxy', 30_000);
          // A pooled connection, idle after one request.
          const pooled = await connect(g.ports.proxy);
          pooled.socket.write(HEAD + CHAT);
          await within(
            new Promise<void>((r) => pooled.socket.on('data', () => pooled.received().includes('}') && r())),
            10_000,
            'the pooled request',
          );
          assert.match(pooled.received(), /^HTTP\/1\.1 200 /);

          g.signal('SIGTERM');
          await g.waitForLog('draining — /readyz now reports 503, still accepting new connections');
          // Accepted during the window: one sends half its request head, one sends nothing.
          const partial = await connect(g.ports.proxy);
          partial.socket.write(HEAD.slice(0, 20));
          const silent = await connect(g.ports.proxy);
          await g.waitForLog('drain complete — closing listeners', 10_000);

          // The listeners are closing: the rest of the request still gets its answer.
          partial.socket.write(HEAD.slice(20) + CHAT);
          const partialEnd = await within(partial.ended, 10_000, 'the half-sent request to be answered');
          assert.equal(partialEnd, 'fin', `the half-sent request's connection ended with ${partialEnd}`);
          assert.match(partial.received(), /^HTTP\/1\.1 200 /, `answer: ${partial.received().slice(0, 200)}`);
          assert.match(partial.received(), /\r\nconnection: close\r\n/i);
          assert.match(partial.received(), /"gpt-upstream"|chat\.completion/);

          assert.equal(await within(pooled.ended, 10_000, 'the idle pooled connection to close'), 'fin');
          // Bun's node:http (plain HTTP/1.1 server) never hands a connection that has sent nothing to the
          // gateway (no 'connection' event, so nothing to close), and once Bun's listener is closed no FIN or
          // reset reaches the peer: it learns when it writes (a reset). Measured with `ss`: the client side
          // stays ESTABLISHED after the process exited. Through the h2c front every socket is the gateway's.
          if (!(runtime === 'bun' && !http2)) {
            assert.equal(await within(silent.ended, 10_000, 'the silent connection to close'), 'fin');
          }
          assert.equal(silent.received(), '');
          assert.equal(await g.waitForExit(10_000), 0);
          for (const c of [pooled, partial, silent]) c.socket.destroy();
        } finally {
          if (!g.exited) g.kill();
        }
      });
    }
  }
});
