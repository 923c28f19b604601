// src/proxy/body-limit.ts `BodyLimit.refuse`: the 413 for a declared length over the limit, and what its answer
// asks of the connection per drain outcome (docs/security.md "Safe defaults: bodies and connections"): a caller
// still sending past the cap keeps it (the runtime discards the rest, so the caller reads the answer), one that
// stalled or broke its body is closed on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BodyLimit, type DrainOutcome } from '../../src/proxy/body-limit.ts';
import { createLogger } from '../../src/observability/logger.ts';

const LIMIT = 1024;
const BOUNDS = { capBytes: 4096, timeoutMs: 50, discardIdleMs: 50, discardMaxMs: 1000 };

/** A refusal of `body` (declared far over the limit) with small bounds; its answer, logged lines and counted outcome. */
async function refuse(body: ReadableStream<Uint8Array>) {
  const lines: Record<string, unknown>[] = [];
  const counted: string[][] = [];
  const limit = new BodyLimit(
    {
      log: createLogger({ level: 'info', format: 'json', write: (l) => lines.push(JSON.parse(l)) }),
      // Only the counter's `inc` is called; the rest of the counter's type is not needed here.
      metrics: { bodyLimitRejections: { inc: (labels: string[]) => void counted.push(labels) } } as never,
      clock: () => 0,
    },
    LIMIT,
    BOUNDS,
  );
  const req = new Request('http://gw/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-length': String(1_000_000) },
    body,
    duplex: 'half',
  } as RequestInit);
  const failed: string[] = [];
  const rec = {
    requestId: 'r1',
    endpoint: '/v1/chat/completions',
    method: 'POST',
    protocol: 'openai',
    inbound: 'openai',
    failed: (type: string) => void failed.push(type),
  };
  // `rec` has the record's members `refuse` reads and calls, typed loosely (`protocol`'s union).
  const res = await limit.refuse(req, rec as never, limit.over(req)!);
  return { res, lines, counted, failed };
}

const endless = () =>
  new ReadableStream<Uint8Array>({
    pull: (c) => c.enqueue(new Uint8Array(1000)),
  });

const cases: [DrainOutcome, () => ReadableStream<Uint8Array>, string | null][] = [
  ['completed', () => new Blob([new Uint8Array(3000)]).stream(), null],
  ['cap_reached', endless, null],
  ['timeout', () => new ReadableStream<Uint8Array>({ start() {} }), 'close'],
  [
    'client_read_error',
    () =>
      new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new Uint8Array(10));
          c.error(new Error('reset'));
        },
      }),
    'close',
  ],
];

for (const [outcome, body, connection] of cases) {
  test(`${outcome}: 413, Connection ${connection ?? 'left to the runtime'}`, async () => {
    const { res, lines, counted, failed } = await refuse(body());
    assert.equal(res.status, 413);
    assert.deepEqual(await res.json(), {
      error: { message: `request body exceeds ${LIMIT}-byte limit`, type: 'invalid_request_error' },
    });
    assert.equal(res.headers.get('connection'), connection);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]!.drain_outcome, outcome);
    assert.equal(lines[0]!.level, outcome === 'completed' ? 'INFO' : 'WARN');
    assert.deepEqual(counted, [['/v1/chat/completions', 'openai', outcome]]);
    assert.deepEqual(failed, ['invalid_request_error']);
  });
}
