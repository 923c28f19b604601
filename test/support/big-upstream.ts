// A misbehaving upstream for the process tests of the upstream limits (test/process/stream-long-line,
// stream-not-sse, upstream-limits): chosen chat requests get tens of MB written with backpressure, the rest a
// small completion; and a gateway of each runtime over it, torn down after the suite.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after } from 'node:test';
import { chatCompletion } from './mock-upstream.ts';
import { baseConfig, CALLER_KEY, resourcesFor, spawnGateway } from './process.ts';
import type { GatewayProcess, RuntimeName } from './process.ts';
import { writeWithBackpressure } from './victim.ts';

/** `bytes` of `a`, the first ones replaced by `head`. */
export function bigPayload(bytes: number, head: string): Buffer {
  const payload = Buffer.alloc(bytes, 0x61);
  Buffer.from(head).copy(payload);
  return payload;
}

export interface BigUpstream {
  /** The `/v1` base to point a provider key at. */
  base: string;
  /** Per big answer, in the order asked: the bytes written so far. */
  bigWritten: number[];
  /** Per big answer: resolves when its socket closed, with the bytes written until then and its user message. */
  bigClosed: Promise<{ written: number; mode: string }>[];
  close(): Promise<void>;
}

/**
 * An upstream answering each chat request by its user message: `other` may answer it first (returning true);
 * a message `big` gives headers for gets 200 with those headers and `payload`, written with backpressure;
 * any other message gets a small `gpt-upstream` completion.
 */
export async function startBigUpstream(o: {
  payload: Buffer;
  big: (content: string | undefined) => http.OutgoingHttpHeaders | undefined;
  other?: (content: string | undefined, res: http.ServerResponse) => boolean;
}): Promise<BigUpstream> {
  const bigWritten: number[] = [];
  const bigClosed: Promise<{ written: number; mode: string }>[] = [];
  const server = http.createServer(async (req, res) => {
    let text = '';
    for await (const c of req) text += c;
    const content = (JSON.parse(text) as { messages: { content: string }[] }).messages[0]?.content;
    if (o.other?.(content, res)) return;
    const headers = o.big(content);
    if (!headers) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(chatCompletion('gpt-upstream')));
      return;
    }
    const slot = bigWritten.push(0) - 1;
    const socket = req.socket;
    bigClosed.push(new Promise((r) => socket.once('close', () => r({ written: bigWritten[slot]!, mode: content! }))));
    res.on('error', () => {});
    res.writeHead(200, headers);
    await writeWithBackpressure(res, o.payload, (n) => (bigWritten[slot] = n));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    bigWritten,
    bigClosed,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * Called inside a `describe`: a function that starts an upstream with `start`, then a gateway of `runtime` over
 * it (the stock config and resources, `CALLER_KEY`), ready at /readyz. Every upstream and gateway it started is
 * stopped after the suite.
 */
export function gatewaysOver<U extends { base: string; close(): Promise<void> }>(
  start: () => Promise<U>,
): (runtime: RuntimeName) => Promise<{ up: U; g: GatewayProcess }> {
  const procs: GatewayProcess[] = [];
  const ups: U[] = [];
  after(async () => {
    await Promise.all(procs.map((g) => g.stop(10_000).catch(() => g.kill())));
    await Promise.all(ups.map((u) => u.close()));
  });
  return async (runtime) => {
    const up = await start();
    ups.push(up);
    const files = { 'resources.yaml': resourcesFor(up.base) };
    const g = await spawnGateway({ runtime, config: baseConfig(), files, env: { CALLER_KEY } });
    procs.push(g);
    await g.waitReady('/readyz');
    return { up, g };
  };
}
