// The estimate's encoder (src/providers/tokenizer.ts, docs/security.md "One caller cannot stall the others"):
// the same tokens as js-tiktoken's own `cl100k_base` encoder for every rank and for mixed texts, and the event
// loop keeps turning while its table is built.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Tiktoken } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { buildEncoder, type Encoder } from '../../src/providers/tokenizer.ts';

/** The longest a `setTimeout(0)` chain waited for its next turn while `work` ran, and how many turns it had. */
async function loopDuring(work: () => Promise<Encoder>): Promise<{ enc: Encoder; turns: number; longest: number }> {
  let turns = 0;
  let longest = 0;
  let on = true;
  let last = performance.now();
  const tick = (): void => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    if (!on) return;
    turns++;
    setTimeout(tick, 0);
  };
  setTimeout(tick, 0);
  const enc = await work();
  on = false;
  return { enc, turns, longest };
}

let built: Encoder | undefined;
const theirs = new Tiktoken(cl100k);

test('the table is built in slices: the event loop turns while it is built', async () => {
  const t = performance.now();
  const { enc, turns, longest } = await loopDuring(buildEncoder);
  built = enc;
  const ms = performance.now() - t;
  console.log(
    `built in ${ms.toFixed(0)} ms: ${turns} turns of the event loop, the longest wait ${longest.toFixed(1)} ms`,
  );
  // js-tiktoken's constructor builds its table in one run (hundreds of ms): one turn at most, when it is done.
  assert.ok(turns >= 5 || ms < 20, `${turns} turns in ${ms.toFixed(0)} ms`);
});

test("the text of every rank in js-tiktoken's table encodes as js-tiktoken encodes it", async () => {
  const enc = built ?? await buildEncoder();
  // js-tiktoken's table (not in its types): each rank by its bytes joined with `,`.
  const table = (theirs as unknown as { rankMap: Map<string, number> }).rankMap;
  assert.equal(table.size, 100_256);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let checked = 0;
  for (const key of table.keys()) {
    const bytes = new Uint8Array(key.split(',').map(Number));
    let text: string;
    try {
      text = decoder.decode(bytes);
    } catch {
      continue; // a rank of part of a character: no text is those bytes alone
    }
    // A rank's text may split into several pieces (`'s` after a letter, spaces before a word); the library
    // is the reference either way.
    assert.deepEqual(enc.encode(text), theirs.encode(text, [], []), JSON.stringify(text));
    checked++;
  }
  assert.ok(checked > 90_000, `${checked} ranks checked`);
});

const MIXED = [
  '',
  'hello world',
  'Unicode: héllo wörld — ✓ 日本語のテキスト 🙂 👩‍👩‍👧',
  '  def f(x):\n\treturn x ** 2  # indentation\r\n\n\n',
  "I'll say it's 12345678 o'clock, they've SAID",
  '<|endoftext|> is plain text here, <|fim_prefix|> too',
  'x'.repeat(64),
  'antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis',
  JSON.stringify({ role: 'user', content: 'a "quoted" \\ string', n: [1, 2.5, -3e10] }),
  '\u0000\u0001 control \u007f and lone \ud800 surrogate',
  ' '.repeat(500) + 'a piece longer than the encoder keeps room for',
];

test('mixed texts give the tokens js-tiktoken gives', async () => {
  const enc = built ?? await buildEncoder();
  for (const text of MIXED) assert.deepEqual(enc.encode(text), theirs.encode(text, [], []), JSON.stringify(text));
});

test('o200k_base: mixed texts give the tokens js-tiktoken gives', async () => {
  const enc = await buildEncoder('o200k_base');
  const ref = new Tiktoken(o200k);
  for (const text of MIXED) assert.deepEqual(enc.encode(text), ref.encode(text, [], []), JSON.stringify(text));
});
