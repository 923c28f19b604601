// Tokens a response used, for the `tpm` rate limits. JSON answers carry `usage` (OpenAI's
// prompt/completion/total tokens, Anthropic's input/output tokens). Streams are charged from the usage the
// upstream puts in the stream, read as the bytes pass by: Anthropic streams always carry it; OpenAI streams
// only when the caller asked for `stream_options.include_usage` (Sluice does not add it behind the caller's
// back). A stream without usage is charged nothing.

interface Counted {
  input?: number;
  output?: number;
  total?: number;
}

function n(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
}

/** Fold one `usage` object (either wire) into what is known so far; later numbers win. */
function fold(into: Counted, usage: unknown): void {
  if (typeof usage !== 'object' || usage === null) return;
  const u = usage as Record<string, unknown>;
  const input = n(u.prompt_tokens) ??
    sumDefined(n(u.input_tokens), n(u.cache_creation_input_tokens), n(u.cache_read_input_tokens));
  const output = n(u.completion_tokens) ?? n(u.output_tokens);
  if (input !== undefined) into.input = input;
  if (output !== undefined) into.output = output;
  if (n(u.total_tokens) !== undefined) into.total = n(u.total_tokens);
}

function sumDefined(...xs: (number | undefined)[]): number | undefined {
  const defined = xs.filter((x): x is number => x !== undefined);
  return defined.length === 0 ? undefined : defined.reduce((a, b) => a + b, 0);
}

function tokensOf(c: Counted): number | undefined {
  if (c.total !== undefined) return c.total;
  if (c.input === undefined && c.output === undefined) return undefined;
  return (c.input ?? 0) + (c.output ?? 0);
}

/** Total tokens of a JSON answer, or undefined when it states none. */
export function usageOfBody(text: string): number | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const c: Counted = {};
  fold(c, (v as { usage?: unknown }).usage);
  return tokensOf(c);
}

/** Reads `usage` out of SSE bytes passing by, without changing them. */
export class StreamUsage {
  private readonly decoder = new TextDecoder();
  private line = '';
  private readonly counted: Counted = {};

  observe(chunk: Uint8Array): void {
    const text = this.line + this.decoder.decode(chunk, { stream: true });
    const lines = text.split('\n');
    this.line = lines.pop() ?? '';
    for (const l of lines) this.readLine(l);
  }

  /** Total tokens seen, or undefined when the stream carried no usage. */
  tokens(): number | undefined {
    if (this.line) this.readLine(this.line);
    this.line = '';
    return tokensOf(this.counted);
  }

  private readLine(line: string): void {
    if (!line.startsWith('data:') || !line.includes('"usage"')) return;
    try {
      const v = JSON.parse(line.slice(5)) as { usage?: unknown; message?: { usage?: unknown } };
      fold(this.counted, v.message?.usage);
      fold(this.counted, v.usage);
    } catch {
      // not JSON: nothing to count
    }
  }
}

/** The same chunks, observed by `meter` on the way through. */
export async function* meteredChunks(
  chunks: AsyncIterable<Uint8Array>,
  meter: StreamUsage,
): AsyncGenerator<Uint8Array> {
  for await (const c of chunks) {
    meter.observe(c);
    yield c;
  }
}
