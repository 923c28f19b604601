// Output checks on streamed answers (docs/guardrails.md "Streams"): the hold-back policy a chain folds to, a
// block after N chunks, a mask spanning two chunks, the hold-back cap exceeded (closed and open), windows.
// Run: node --import tsx --test test/unit/guardrails-stream.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ChainDeps } from '../../src/guardrails/chain.ts';
import { streamBlockFrame } from '../../src/guardrails/frames.ts';
import { foldPolicy, guardStream, type StreamGuardOptions } from '../../src/guardrails/stream.ts';
import type { Guardrail } from '../../src/guardrails/types.ts';
import { guardrail } from '../support/guardrails.ts';

const enc = new TextEncoder();
const dec = new TextDecoder();

function chat(content: string, index = 0): string {
  return `data: ${JSON.stringify({ id: 'c', choices: [{ index, delta: { content } }] })}\n\n`;
}
const DONE = 'data: [DONE]\n\n';

async function* upstream(frames: string[], onPull?: (i: number) => void): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < frames.length; i++) {
    onPull?.(i);
    yield enc.encode(frames[i]!);
  }
}

const deps: ChainDeps = {
  ctx: { fetch: () => Promise.reject(new Error('offline')) },
  log: () => {},
  now: () => performance.now() / 1000,
};

async function run(
  chain: Guardrail[],
  frames: string[],
  over: Partial<StreamGuardOptions> = {},
): Promise<{ out: string[]; aborted: boolean; blocked: (string | undefined)[] }> {
  let aborted = false;
  const blocked: (string | undefined)[] = [];
  const out: string[] = [];
  const g = guardStream(upstream(frames), {
    chain,
    endpoint: 'chat',
    wire: 'openai',
    deps,
    abort: () => (aborted = true),
    onBlock: (n) => blocked.push(n),
    ...over,
  });
  for await (const c of g) out.push(dec.decode(c));
  return { out, aborted, blocked };
}

const kw = guardrail({ name: 'kw', kind: 'keyword', patterns: [{ kind: 'literal', value: 'forbidden' }] });
const pii = guardrail({ name: 'pii', kind: 'pii', detectors: [{ type: 'email' }], max_buffer_bytes: 64 });

describe('stream hold-back', () => {
  test('the chain folds to its strictest enforcing output member; monitor and input-only members hold nothing', () => {
    const monitor = guardrail({
      name: 'm',
      kind: 'keyword',
      enforcement_mode: 'monitor',
      patterns: [{ kind: 'literal', value: 'x' }],
    });
    const inputOnly = guardrail({
      name: 'i',
      kind: 'keyword',
      hook_point: 'input',
      patterns: [{ kind: 'literal', value: 'x' }],
    });
    const win = guardrail({
      name: 'w',
      kind: 'azure_content_safety_text_moderation',
      endpoint: 'http://127.0.0.1:1',
      api_key: 'k',
      window_size: 100,
      window_overlap_size: 10,
    });
    const win2 = guardrail({
      name: 'w2',
      kind: 'azure_content_safety_text_moderation',
      endpoint: 'http://127.0.0.1:1',
      api_key: 'k',
      window_size: 50,
      window_overlap_size: 20,
    });
    assert.deepEqual(foldPolicy([monitor, inputOnly], 'openai'), { kind: 'end' });
    assert.deepEqual(foldPolicy([win, win2], 'openai'), { kind: 'window', size: 50, overlap: 20 });
    assert.deepEqual(foldPolicy([win, kw, pii], 'openai'), { kind: 'buffer', maxBytes: 64, failOpen: false });
    assert.deepEqual(foldPolicy([win], 'anthropic'), { kind: 'end' }, '/v1/messages checks window chains at the end');
  });

  test('a block after N chunks: nothing of the answer, the error frame, no [DONE], the upstream aborted', async () => {
    const r = await run([kw], [chat('one '), chat('two '), chat('forbidden'), chat(' four'), DONE]);
    assert.deepEqual(r.out, [streamBlockFrame('openai', 'kw')]);
    assert.equal(r.aborted, true);
    assert.deepEqual(r.blocked, ['kw']);
  });

  test('a clean answer is released byte for byte after the check, [DONE] last', async () => {
    const frames = [chat('hello '), chat('world'), DONE];
    const r = await run([kw], frames);
    assert.deepEqual(r.out, frames);
    assert.equal(r.aborted, false);
  });

  test("a mask spanning two chunks: the rewritten text on the channel's first frame, the others emptied", async () => {
    const r = await run([pii], [chat('write to bob@exa'), chat('mple.com today'), DONE]);
    assert.deepEqual(r.out, [chat('write to [EMAIL_REDACTED] today'), chat(''), DONE]);
  });

  test('over the hold-back cap: fail-closed ends with the nameless frame; fail-open releases and goes live', async () => {
    const long = Array.from({ length: 10 }, (_, i) => chat(`chunk number ${i} `));
    const closed = await run([pii], [...long, DONE]);
    assert.deepEqual(closed.out, [streamBlockFrame('openai', undefined)]);
    assert.deepEqual(closed.blocked, [undefined]);
    const open = guardrail({
      name: 'o',
      kind: 'pii',
      detectors: [{ type: 'email' }],
      max_buffer_bytes: 64,
      on_buffer_exceeded: 'fail_open',
    });
    const r = await run([open], [...long, chat('a@b.io'), DONE]);
    assert.deepEqual(r.out, [...long, chat('a@b.io'), DONE], 'released unscanned and unmasked');
    const anthropic = await run([open], [...long, DONE], { wire: 'anthropic' });
    assert.deepEqual(anthropic.out, [streamBlockFrame('anthropic', undefined)], '/v1/messages always fails closed');
  });

  test('Anthropic streams: text deltas are held and masked per content block', async () => {
    const ev = (type: string, body: Record<string, unknown>) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`;
    const frames = [
      ev('message_start', { message: { id: 'm' } }),
      ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'to a@b' } }),
      ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: '.io' } }),
      ev('message_stop', {}),
    ];
    const r = await run([pii], frames, { endpoint: 'messages', wire: 'anthropic' });
    assert.deepEqual(r.out, [
      frames[0],
      ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'to [EMAIL_REDACTED]' } }),
      ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: '' } }),
      frames[3],
    ]);
  });

  test('windows: released window by window; a block ends the stream where it is, earlier windows delivered', async () => {
    const seen: string[] = [];
    const win: Guardrail = {
      ...kw,
      name: 'win',
      stream: { kind: 'window', size: 10, overlap: 3 },
      check: (s) => {
        seen.push(s[0]!.text);
        return s[0]!.text.includes('bad') ? { kind: 'block', reason: 'r' } : { kind: 'allow' };
      },
    };
    const r = await run([win], [chat('0123456789'), chat('abcdefghij'), chat('xyz bad!!!!'), chat('more'), DONE]);
    assert.deepEqual(r.out, [chat('0123456789'), chat('abcdefghij'), streamBlockFrame('openai', 'win')]);
    assert.deepEqual(seen, ['0123456789', '789abcdefghij', 'hijxyz bad!!!!']);
  });
});
