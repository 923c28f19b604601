// The edits an OpenAI chat stream passes through on its way to the caller, without sockets: the injected-usage
// filter, the vendor quirks and the caller's model splice, stacked as callProvider stacks them, over the bench
// mock's stream (20 chunks, then the usage chunk and `[DONE]`). Two shapes of network chunk: one event each
// (Deno's client delivers them so) and seven events each (Node's under load). `--baseline DIR` runs the same
// chain from another built tree in the same process, alternating rounds; medians of µs per stream.
//
//   node --import tsx bench/stream-edits.ts [--streams 10000] [--rounds 5] [--baseline /tmp/other-tree]
//   deno run -A bench/stream-edits.ts …      bun bench/stream-edits.ts …
import { flag } from './flags.ts';
import { chunkJson, USAGE_CHUNK } from './mock-answer.mjs';

const STREAMS = Number(flag('streams', '10000'));
const ROUNDS = Number(flag('rounds', '5'));
const BASELINE = flag('baseline', '');

type Chunks = AsyncIterable<Uint8Array>;
interface Chain {
  name: string;
  /** The stream as the caller gets it; `splice` false leaves the caller's model out. */
  run(chunks: Chunks, splice: boolean): Chunks;
}

async function chainOf(name: string, root: string): Promise<Chain> {
  const model = await import(`${root}/src/providers/caller-model.ts`);
  const usage = await import(`${root}/src/providers/injected-usage.ts`);
  const quirks = await import(`${root}/src/providers/openai-quirks.ts`);
  return {
    name,
    run(chunks, splice) {
      const r = quirks.normaliseChatResult({ kind: 'stream', chunks: usage.withoutInjectedUsage(chunks, () => {}) });
      return splice ? model.streamWithCallerModel(r.chunks, 'bench-route') : r.chunks;
    },
  };
}

const enc = new TextEncoder();
const EVENTS = [
  ...Array.from({ length: 20 }, (_, i) => chunkJson(i, i === 0 ? `fp_t${Date.now()}` : 'fp_bench', 20)),
  `data: ${JSON.stringify(USAGE_CHUNK)}\n\n`,
  'data: [DONE]\n\n',
];
const SHAPES: Record<string, Uint8Array[]> = {
  'one event per chunk': EVENTS.map((e) => enc.encode(e)),
  'seven events per chunk': Array.from(
    { length: Math.ceil(EVENTS.length / 7) },
    (_, i) => enc.encode(EVENTS.slice(7 * i, 7 * i + 7).join('')),
  ),
};

async function drain(chain: Chain, shape: Uint8Array[], splice: boolean): Promise<number> {
  async function* source() {
    yield* shape;
  }
  let n = 0;
  for await (const c of chain.run(source(), splice)) n += c.length;
  return n;
}

/** µs per stream over `STREAMS` streams, after a tenth as many unmeasured. */
async function measure(chain: Chain, shape: Uint8Array[], splice: boolean): Promise<number> {
  for (let i = 0; i < STREAMS / 10; i++) await drain(chain, shape, splice);
  const t0 = performance.now();
  for (let i = 0; i < STREAMS; i++) await drain(chain, shape, splice);
  return (performance.now() - t0) * 1000 / STREAMS;
}

const chains = [await chainOf('this tree', new URL('..', import.meta.url).pathname.replace(/\/$/, ''))];
if (BASELINE) chains.push(await chainOf(`baseline ${BASELINE}`, BASELINE.replace(/\/$/, '')));
const cells = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const chain of chains) {
    for (const [shape, chunks] of Object.entries(SHAPES)) {
      for (const splice of [true, false]) {
        const key = `| ${shape} | ${splice ? 'yes' : 'no'} | ${chain.name} |`;
        cells.set(key, [...(cells.get(key) ?? []), await measure(chain, chunks, splice)]);
      }
    }
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`${STREAMS} streams per round, ${ROUNDS} rounds, alternating; µs of wall time per stream (one core)\n`);
console.log('| network chunks | caller model spliced | tree | median | rounds |\n|---|---|---|---:|---|');
for (const [key, xs] of cells) {
  console.log(`${key} ${median(xs).toFixed(1)} | ${xs.map((x) => x.toFixed(1)).join(', ')} |`);
}
