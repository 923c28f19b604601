// The text an answer produced (content, reasoning, tool names and arguments), in any of the wires Sluice
// serves, for the local completion-token estimate (estimate.ts) when an upstream reports no usage. A
// stream's text is only kept as it passes (up to a cap, then only its length) and read when an estimate is
// needed (docs/aisix-compatibility.md "Translation and token accounting").
import { DEFAULT_MAX_SSE_EVENT_BYTES, parseSse } from './sse.ts';
import { isRecord, type Json, parseJsonObject } from './translate/shared.ts';

/** The most stream bytes kept for an estimate; past them only the stream's length is counted. */
export const MAX_COLLECTED_BYTES = 1 << 18;

/** A Responses stream's terminal event, which repeats every output item its deltas already gave. */
const TERMINAL = /response\.(?:completed|incomplete)/;

function push(out: string[], v: unknown): void {
  if (typeof v === 'string' && v !== '') out.push(v);
}

function toolCallTexts(calls: unknown, out: string[]): void {
  for (const c of Array.isArray(calls) ? calls : []) {
    if (!isRecord(c)) continue;
    const fn = isRecord(c.function) ? c.function : c;
    push(out, fn.name);
    push(out, fn.arguments);
  }
}

/** Texts of one JSON object of any wire: a whole answer or one stream event. */
function textsOf(j: Json, out: string[]): void {
  for (const choice of Array.isArray(j.choices) ? j.choices : []) {
    if (!isRecord(choice)) continue;
    push(out, choice.text); // legacy completions
    for (const m of [choice.message, choice.delta]) {
      if (!isRecord(m)) continue;
      push(out, m.content);
      push(out, m.reasoning_content);
      push(out, m.reasoning);
      toolCallTexts(m.tool_calls, out);
    }
  }
  // Anthropic: a whole message's blocks, or a stream's block starts and deltas.
  const blocks = Array.isArray(j.content) ? j.content : isRecord(j.content_block) ? [j.content_block] : [];
  for (const b of blocks) {
    if (!isRecord(b)) continue;
    push(out, b.text);
    push(out, b.thinking);
    if (b.type === 'tool_use') {
      push(out, b.name);
      if (isRecord(b.input) && Object.keys(b.input).length > 0) out.push(JSON.stringify(b.input));
    }
  }
  if (isRecord(j.delta)) { for (const k of ['text', 'thinking', 'partial_json'] as const) push(out, j.delta[k]); }
  // Responses: a whole answer's output items, or a stream's deltas (`delta` is then a string).
  if (typeof j.type === 'string' && j.type.endsWith('.delta')) push(out, j.delta);
  if (j.object === 'response') responseTexts(j.output, out);
}

function responseTexts(output: unknown, out: string[]): void {
  for (const item of Array.isArray(output) ? output : []) {
    if (!isRecord(item)) continue;
    if (item.type === 'function_call') toolCallTexts([item], out);
    for (const p of Array.isArray(item.content) ? item.content : []) if (isRecord(p)) push(out, p.text);
  }
}

/** The produced text of a JSON answer; empty when the body is not one. */
export function answerText(body: string): string {
  const j = parseJsonObject(body);
  if (!j) return '';
  const out: string[] = [];
  textsOf(j, out);
  return out.join('');
}

/**
 * Collects a stream's text as it passes, up to `MAX_COLLECTED_BYTES` of its bytes; past them only their length,
 * by which `scale()` extrapolates what the kept part says. `text()` reads the produced text out of what was kept.
 * The decoded text is kept, not the chunks: a chunk may be a view on a runtime's larger buffer, which it would
 * keep alive.
 */
export class StreamText {
  private readonly kept: string[] = [];
  private keptBytes = 0;
  private restBytes = 0;

  /** `maxEventBytes`: `upstream.max_sse_event_bytes`, the bound the replay parses with (0 = none). */
  constructor(private readonly maxEventBytes = DEFAULT_MAX_SSE_EVENT_BYTES) {}

  /** `text`: the chunk decoded (complete characters), as the stream's meter already has it. */
  observe(chunk: Uint8Array, text: string): void {
    if (this.keptBytes < MAX_COLLECTED_BYTES) {
      this.kept.push(text);
      this.keptBytes += chunk.length;
    } else if (!TERMINAL.test(text)) this.restBytes += chunk.length;
  }

  /** How many times the kept bytes the whole stream was: 1 unless it outgrew the cap. */
  scale(): number {
    return this.keptBytes === 0 ? 1 : (this.keptBytes + this.restBytes) / this.keptBytes;
  }

  async text(): Promise<string> {
    const out: string[] = [];
    const kept = encoder.encode(this.kept.join('')); // one piece: the parser decodes and splits it once
    async function* replay(): AsyncGenerator<Uint8Array> {
      yield kept;
    }
    try {
      for await (const ev of parseSse(replay(), this.maxEventBytes)) {
        // A Responses stream's terminal event repeats every output item: its deltas were already counted.
        if (ev.event === 'response.completed' || ev.event === 'response.incomplete') continue;
        const j = parseJsonObject(ev.data);
        if (j) textsOf(j, out);
      }
    } catch {
      // An event over the bound (its lines each under it passed the stream): the text before it counts.
    }
    return out.join('');
  }
}

const encoder = new TextEncoder();
