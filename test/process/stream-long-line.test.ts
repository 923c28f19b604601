// Black-box, on Node, Bun and Deno: a streamed answer whose upstream sends one 50 MB `data:` line with no
// newline (docs/operations.md "Limits and failure behaviour", `upstream.max_sse_event_bytes`) ends once the
// line passes the bound — with the OpenAI error event, never the 50 MB relayed — and the other callers of
// the instance barely notice: the median latency of a victim's plain requests while two callers keep sending such streams stays within a small ratio of its median before.
// Run: node build.mjs && node --import tsx --test test/process/stream-long-line.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { bigPayload, type BigUpstream, gatewaysOver, startBigUpstream } from '../support/big-upstream.ts';
import type { RuntimeName } from '../support/process.ts';
import { median, timedChat, victimUnderAttack } from '../support/victim.ts';

// Far past the bound: until the cut reaches the upstream, its writes go on filling the socket buffers and what the
// gateway's client reads ahead (most on Bun), so a shorter line could be written whole and a cut upstream look drained.
const BIG = 50_000_000;
const BOUND = 4_194_304;
const ATTACKERS = 2;
/** Each attacker's pause between its streams: the instance is not saturated, so the ratio shows what one costs. */
const PAUSE_MS = 100;
const SAMPLES = 40;
/** The victim keeps sampling until at least this many such streams were cut. */
const MIN_REFUSED = 10;

/** `long-line` → an SSE stream of one 50 MB `data:` line with no newline; anything else → a small completion. */
const startUpstream = (): Promise<BigUpstream> =>
  startBigUpstream({
    payload: bigPayload(BIG, 'data: '),
    big: (content) => content === 'long-line' ? { 'content-type': 'text/event-stream' } : undefined,
  });

describe(
  'a stream of one 50 MB line with no newline (gateway processes on node, bun, deno)',
  { timeout: 240_000 },
  () => {
    const gatewayOver = gatewaysOver(startUpstream);

    for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
      test(`${runtime}: the stream ends with the error event at the bound; the victim's latency stays near its baseline`, async () => {
        const { up, g } = await gatewayOver(runtime);
        // Attackers keep sending such streams while the victim samples again.
        const { before, during, attacks: cut } = await victimUnderAttack(g, {
          samples: SAMPLES,
          attackers: ATTACKERS,
          pauseMs: PAUSE_MS,
          minAttacks: MIN_REFUSED,
          attack: () => timedChat(g, 'long-line', { stream: true }),
        });

        assert.ok(cut.length >= MIN_REFUSED, `${runtime}: streams cut: ${cut.length}`);
        const errorEvent = `data: ${
          JSON.stringify({
            error: {
              message: `upstream stream event over ${BOUND} bytes without an end (upstream.max_sse_event_bytes)`,
              type: 'upstream_error',
            },
          })
        }\n\n`;
        for (const r of cut) {
          assert.equal(r.status, 200);
          assert.match(r.contentType ?? '', /^text\/event-stream/);
          assert.ok(r.body.endsWith(errorEvent), r.body.slice(-300));
          assert.ok(r.body.length <= BOUND + errorEvent.length, `${runtime}: relayed ${r.body.length} characters`);
        }
        // One upstream call per caller request (not retried), each cut long before its 50 MB.
        assert.equal(up.bigWritten.length, cut.length);
        const ratio = median(during) / median(before);
        console.log(
          `${runtime}: victim p50 ${median(before).toFixed(1)} ms before, ${median(during).toFixed(1)} ms during ` +
            `${cut.length} cut streams (×${ratio.toFixed(2)}); upstream bytes written per stream: max ` +
            `${Math.max(...up.bigWritten)}`,
        );
        // Unbounded, one such line cost seconds of CPU (quadratic scans) and stalled every caller; cut at the
        // bound in linear time it costs a few hundred milliseconds of copying. ×6 leaves room on a loaded machine.
        assert.ok(ratio <= 6, `${runtime}: victim p50 ×${ratio.toFixed(2)} (${median(before)} → ${median(during)} ms)`);
        assert.ok(Math.max(...up.bigWritten) < BIG, `${runtime}: an upstream sent its whole ${BIG} bytes`);
      });
    }
  },
);
