// One stream's UTF-8 chunks decoded in order, to the text `TextDecoder`'s streaming mode gives. A chunk that
// leaves nothing held is decoded without that mode, which Node and Deno decode faster
// (docs/performance.md "Stream chunks decoded without the streaming mode"); the stream's own streaming
// decoder is made only when a chunk ends inside a character, or the stream opens with a byte order mark.

/** Shared by every stream: never in the streaming mode, so it holds nothing between calls. */
const whole = new TextDecoder('utf-8', { ignoreBOM: true });

function startsWithBom(b: Uint8Array): boolean {
  return b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf;
}

/**
 * Decodes one stream's chunks: `decode` returns what `new TextDecoder().decode(chunk, { stream: true })` on one
 * decoder would (replacement characters for invalid bytes, the stream's leading byte order mark dropped).
 */
export class Utf8Stream {
  private own: TextDecoder | undefined;
  /** The own decoder may hold the first bytes of a character. */
  private holding = false;
  private atStart = true;

  decode(chunk: Uint8Array): string {
    if (chunk.length === 0) return '';
    const start = this.atStart;
    this.atStart = false;
    // An ASCII last byte ends every sequence: after it, a decoder holds nothing.
    const endsWhole = chunk[chunk.length - 1]! < 0x80;
    if (!this.holding && endsWhole && !(start && startsWithBom(chunk))) return whole.decode(chunk);
    this.own ??= new TextDecoder('utf-8', { ignoreBOM: !start });
    this.holding = !endsWhole;
    return this.own.decode(chunk, { stream: true });
  }

  /** The end of the stream: a character left unfinished comes out as U+FFFD, as `decode()` would give it. */
  end(): string {
    if (!this.holding) return '';
    this.holding = false;
    return this.own!.decode();
  }
}
