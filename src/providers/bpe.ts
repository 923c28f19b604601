// OpenAI's byte-pair encodings, counting only, for the local token estimates (estimate.ts; docs/translation.md
// "Estimated tokens"). The rank files are js-tiktoken's; the table is built here in slices that give the event
// loop back between them, so building it holds no other request, and a count is tiktoken's (special-token
// spellings count as the plain text they are).

/** A js-tiktoken rank file: the pre-tokenizer pattern and the ranks, base64 tokens after each offset. */
export interface RankFile {
  pat_str: string;
  bpe_ranks: string;
}

/** The longest a build holds the event loop at once, in ms (GC pauses aside). */
const SLICE_MS = 4;
/** Ranks read between two looks at the clock. */
const CHECK_EVERY = 1024;

/** A built table: counts tokens synchronously. */
export class BpeCounter {
  private constructor(private readonly ranks: Map<string, number>, private readonly pattern: RegExp) {}

  /**
   * Builds the table of `file`, awaiting `pause()` whenever a slice has run `SLICE_MS`. Keys are the tokens'
   * bytes as one-byte characters (`atob`'s binary strings), which is also what `count` looks up.
   */
  static async build(file: RankFile, pause: () => Promise<void>): Promise<BpeCounter> {
    const ranks = new Map<string, number>();
    let sliceStart = performance.now();
    let read = 0;
    for (const line of file.bpe_ranks.split('\n')) {
      // `<prefix> <offset> <token> <token> …`: ranks run up from the offset.
      let at = line.indexOf(' ') + 1;
      if (at === 0) continue;
      let space = line.indexOf(' ', at);
      let rank = Number(line.slice(at, space === -1 ? undefined : space));
      while (space !== -1) {
        at = space + 1;
        space = line.indexOf(' ', at);
        ranks.set(atob(space === -1 ? line.slice(at) : line.slice(at, space)), rank++);
        if (++read % CHECK_EVERY === 0 && performance.now() - sliceStart >= SLICE_MS) {
          await pause();
          sliceStart = performance.now();
        }
      }
    }
    return new BpeCounter(ranks, new RegExp(file.pat_str, 'gu'));
  }

  /** The tokens of `text`. */
  count(text: string): number {
    let n = 0;
    for (const m of text.matchAll(this.pattern)) {
      const piece = binary(m[0]);
      n += this.ranks.has(piece) ? 1 : this.merged(piece);
    }
    return n;
  }

  /** tiktoken's merge: join the adjacent pair of the lowest rank (the first on a tie) until none has one. */
  private merged(piece: string): number {
    const bounds = Array.from({ length: piece.length + 1 }, (_, i) => i);
    while (bounds.length > 2) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 2 < bounds.length; i++) {
        const r = this.ranks.get(piece.slice(bounds[i], bounds[i + 2]));
        if (r !== undefined && r < bestRank) {
          bestRank = r;
          best = i;
        }
      }
      if (best < 0) break;
      bounds.splice(best + 1, 1);
    }
    let n = 0;
    for (let i = 0; i + 1 < bounds.length; i++) if (this.ranks.has(piece.slice(bounds[i], bounds[i + 1]))) n++;
    return n;
  }
}

const utf8 = new TextEncoder();
const NOT_ASCII = /[\u0080-\uffff]/;

/** A string's UTF-8 bytes as one-byte characters (ASCII is its own). */
function binary(s: string): string {
  if (!NOT_ASCII.test(s)) return s;
  let out = '';
  for (const b of utf8.encode(s)) out += String.fromCharCode(b);
  return out;
}
