// What a passthrough answer says it used (docs/endpoints.md "Passthrough routes"), read on the side while the
// bytes pass unchanged: AISIX's union of the OpenAI, Responses and Anthropic usage members, a stream's frames
// merged by the largest value of each field. Bounded: a whole answer is read only up to `MAX_READ_BYTES`, an
// event stream's frame only up to `MAX_FRAME_BYTES` (past it, the frame is skipped).
import { joinBytes } from '../util/bytes.ts';
/** Tokens an answer reported (the proxy's `Usage` shape). */
export interface Usage {
  input?: number;
  output?: number;
}

/** A whole (non-stream) answer past this many bytes is relayed without reading its usage. */
export const MAX_READ_BYTES = 4 * 1024 * 1024;
/** An event-stream frame without a terminator within this many bytes is passed on unread. */
export const MAX_FRAME_BYTES = 1024 * 1024;

/** The request's envelope (AISIX's detection from the body's top-level keys): only it says where usage is. */
export type Envelope = 'chat' | 'responses' | 'completions' | 'raw';

export function detectEnvelope(body: unknown): Envelope {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'raw';
  const b = body as Record<string, unknown>;
  if (Array.isArray(b.messages)) return 'chat';
  if (typeof b.input === 'string' || Array.isArray(b.input)) return 'responses';
  if (typeof b.prompt === 'string' || Array.isArray(b.prompt)) return 'completions';
  return 'raw';
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);

/** One usage object read as the union of its vendors' member names. */
function usageOf(u: unknown): Usage | undefined {
  if (typeof u !== 'object' || u === null) return undefined;
  const o = u as Record<string, unknown>;
  const input = num(o.prompt_tokens) ?? num(o.input_tokens);
  const output = num(o.completion_tokens) ?? num(o.output_tokens);
  if (input === undefined && output === undefined) return undefined;
  return { input, output };
}

function merge(a: Usage | undefined, b: Usage | undefined): Usage | undefined {
  if (!a || !b) return a ?? b;
  const max = (x?: number, y?: number) => (x === undefined ? y : y === undefined ? x : Math.max(x, y));
  return { input: max(a.input, b.input), output: max(a.output, b.output) };
}

const utf8 = new TextDecoder();

/** Reads usage from the answer's chunks as they pass; `usage` once the last one went by. */
export class UsageReader {
  private usage: Usage | undefined;
  private held: Uint8Array[] = [];
  private heldBytes = 0;
  private overflow = false;
  private pending = '';

  constructor(private readonly envelope: Envelope, private readonly eventStream: boolean) {}

  push(chunk: Uint8Array): void {
    if (this.eventStream) return this.frames(utf8.decode(chunk, { stream: true }));
    if (this.envelope === 'raw' || this.overflow) return;
    this.heldBytes += chunk.byteLength;
    if (this.heldBytes > MAX_READ_BYTES) {
      this.overflow = true;
      this.held = [];
      return;
    }
    this.held.push(chunk);
  }

  /** What the answer reported (undefined: nothing). */
  finish(): Usage | undefined {
    if (!this.eventStream && !this.overflow && this.held.length > 0) {
      const all = joinBytes(this.held, this.heldBytes);
      this.held = [];
      try {
        this.usage = usageOf((JSON.parse(utf8.decode(all)) as Record<string, unknown>)?.usage);
      } catch { /* not JSON: no usage */ }
    }
    return this.usage;
  }

  private frames(text: string): void {
    this.pending += text;
    for (;;) {
      const m = /\r?\n\r?\n/.exec(this.pending);
      if (!m) break;
      this.frame(this.pending.slice(0, m.index));
      this.pending = this.pending.slice(m.index + m[0].length);
    }
    if (this.pending.length > MAX_FRAME_BYTES) this.pending = '';
  }

  private frame(frame: string): void {
    let event = '';
    const data: string[] = [];
    for (const line of frame.split(/\r?\n/)) {
      if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
    if (data.length === 0) return;
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(data.join('\n')) as Record<string, unknown>;
    } catch {
      return;
    }
    if (typeof v !== 'object' || v === null) return;
    const message = v.message as Record<string, unknown> | undefined;
    const response = v.response as Record<string, unknown> | undefined;
    let u = merge(usageOf(v.usage), usageOf(message?.usage));
    if (this.envelope === 'responses') u = merge(u, usageOf(response?.usage));
    if (this.envelope === 'raw' && (event === 'token_usage' || event === 'usage')) u = merge(u, usageOf(v));
    this.usage = merge(this.usage, u);
  }
}
