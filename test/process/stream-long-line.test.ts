// Black-box, on Node, Bun and Deno: a streamed answer whose upstream sends one 50 MB `data:` line with no
// newline (docs/operations.md "Limits and failure behaviour", `upstream.max_sse_event_bytes`) ends once the
// line passes the bound — with the OpenAI error event, never the 50 MB relayed — and the other callers of
// the instance barely notice: the median latency of a victim's plain requests while two callers keep sending such streams stays within a small ratio of its median before.
// And one 20 MB line, the first such stream of a new instance (its end builds the token estimate's tables) or any
// later one, stalls no other caller: the median latency of a victim's requests sent at a steady pace while such a
// line runs stays within 5× the median before, plus 20 ms (docs/security.md "One caller cannot stall the others").
// Run: node build.mjs && node --import tsx --test test/process/stream-long-line.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { bigPayload, type BigUpstream, gatewaysOver, startBigUpstream } from '../support/big-upstream.ts';
import type { GatewayProcess, RuntimeName } from '../support/process.ts';
import { sleep } from '../support/until.ts';
import { median, steadyStream, type TimedChat, timedChat, victimUnderAttack } from '../support/victim.ts';

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
const startUpstream = (bytes = BIG): Promise<BigUpstream> =>
  startBigUpstream({
    payload: bigPayload(bytes, 'data: '),
    big: (content) => content === 'long-line' ? { 'content-type': 'text/event-stream' } : undefined,
  });

/** The OpenAI error event a stream cut at the bound ends with. */
const ERROR_EVENT = `data: ${
  JSON.stringify({
    error: {
      message: `upstream stream event over ${BOUND} bytes without an end (upstream.max_sse_event_bytes)`,
      type: 'upstream_error',
    },
  })
}\n\n`;

/** A stream cut at the bound: 200, the start of the line at most, then the error event. */
function assertCut(runtime: RuntimeName, r: TimedChat): void {
  assert.equal(r.status, 200);
  assert.match(r.contentType ?? '', /^text\/event-stream/);
  assert.ok(r.body.endsWith(ERROR_EVENT), r.body.slice(-300));
  assert.ok(r.body.length <= BOUND + ERROR_EVENT.length, `${runtime}: relayed ${r.body.length} characters`);
}

/** The single-line case: 20 MB, cut by the bound at 4 MiB. */
const SINGLE = 20_000_000;
/** The victim's pace: a request every this many ms whatever the earlier ones are doing, so a stall shows as every
 *  request sent during it (a caller sending back to back would count it once). */
const EVERY_MS = 20;
/** Victim requests before the first line, and at least as many sent while a line ran. */
const STEADY_SAMPLES = 40;
/** Victim requests sent with no line running between one line's end and the next line; all but the first (which
 *  may meet what the line left queued) count in the baseline, so it follows the machine's load as the lines run. */
const GAP = 5;

/**
 * A victim's requests at a steady pace while single 20 MB lines run one at a time, the next one once `GAP` victim
 * requests went with none running, until `STEADY_SAMPLES` were sent while one ran (the first line, whose end builds
 * the token estimate's tables, lasts longest). Every victim answer must be 200. Resolves with the latencies of
 * the requests sent while a line ran, of those sent between lines (the first after each line left out), and every
 * line's answer.
 */
async function victimDuringLines(
  g: GatewayProcess,
): Promise<{ during: number[]; between: number[]; lines: TimedChat[] }> {
  const lines: TimedChat[] = [];
  const during: Promise<TimedChat>[] = [];
  const between: Promise<TimedChat>[] = [];
  const afterLine: Promise<TimedChat>[] = [];
  let line: Promise<TimedChat> | undefined;
  let sinceLine = GAP;
  for (let next = performance.now(); during.length < STEADY_SAMPLES;) {
    if (line === undefined && sinceLine >= GAP) {
      line = timedChat(g, 'long-line', { stream: true }).then((r) => {
        lines.push(r);
        line = undefined;
        sinceLine = 0;
        return r;
      });
    }
    const v = timedChat(g, 'victim', { stream: false });
    if (line) during.push(v);
    else (sinceLine++ === 0 ? afterLine : between).push(v);
    next += EVERY_MS;
    await sleep(Math.max(0, next - performance.now()));
  }
  await line;
  const answers = await Promise.all([...during, ...between, ...afterLine]);
  for (const a of answers) assert.equal(a.status, 200, a.body.slice(0, 300));
  const ms = async (xs: Promise<TimedChat>[]) => (await Promise.all(xs)).map((a) => a.ms);
  return { during: await ms(during), between: await ms(between), lines };
}

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
        for (const r of cut) assertCut(runtime, r);
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

describe(
  '20 MB lines with no newline, one at a time, from the first of a new instance (gateway processes on node, bun, deno)',
  { timeout: 240_000 },
  () => {
    const gatewayOver = gatewaysOver(() => startUpstream(SINGLE));

    for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
      test(`${runtime}: the victim's median latency while the line runs stays within 5× its baseline + 20 ms`, async () => {
        const { g } = await gatewayOver(runtime);
        // Answers that state their usage: nothing is estimated before the line.
        for (let i = 0; i < 20; i++) assert.equal((await timedChat(g, 'warm', { stream: false })).status, 200);
        const first = await steadyStream(g, EVERY_MS, STEADY_SAMPLES);
        const { during, between, lines } = await victimDuringLines(g);
        for (const r of lines) assertCut(runtime, r);
        // The baseline: before the first line, and right before each later one.
        const baseline = median([...first, ...between]);
        const bound = 5 * baseline + 20;
        console.log(
          `${runtime}: victim p50 ${baseline.toFixed(1)} ms with no line (${median(first).toFixed(1)} before the ` +
            `first, ${median(between).toFixed(1)} between), ${median(during).toFixed(1)} ms during ${lines.length} ` +
            `lines (${during.length} sent; bound ${bound.toFixed(1)} ms); lines took ` +
            `${lines.map((l) => l.ms.toFixed(0)).join(' ')} ms`,
        );
        assert.ok(
          median(during) <= bound,
          `${runtime}: victim p50 ${median(during).toFixed(1)} ms while the lines ran, over ${bound.toFixed(1)} ms ` +
            `(5 × ${baseline.toFixed(1)} ms with no line + 20 ms)`,
        );
      });
    }
  },
);
