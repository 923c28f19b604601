// A list of up to millions of items kept in arrays of `CHUNK` (docs/performance.md "Configuration at scale"):
// one array of a million grows by copying every item in one call, which held the event loop while a reload
// built it. A chunk is appended to, never copied whole.

const CHUNK_BITS = 13;
/** Items per chunk (a power of two). */
export const CHUNK = 1 << CHUNK_BITS;

export class ChunkedList<T> {
  private readonly chunks: T[][] = [];

  /** The item at `i`; undefined where nothing was put. */
  at(i: number): T | undefined {
    return this.chunks[i >>> CHUNK_BITS]?.[i & (CHUNK - 1)];
  }

  /** `value` at `i`, the chunks before it made as needed. */
  set(i: number, value: T): void {
    (this.chunks[i >>> CHUNK_BITS] ??= [])[i & (CHUNK - 1)] = value;
  }

  /** `value` after the last chunk's last item: its place. */
  push(value: T): number {
    let chunk = this.chunks[this.chunks.length - 1];
    if (chunk === undefined || chunk.length === CHUNK) this.chunks.push(chunk = []);
    chunk.push(value);
    return ((this.chunks.length - 1) << CHUNK_BITS) + chunk.length - 1;
  }

  /** The items in place order (a chunk `set` never reached is skipped, not listed as empty places). */
  *values(): Generator<T, undefined> {
    for (const chunk of this.chunks) if (chunk !== undefined) yield* chunk;
  }
}
