// Server-sent-event framing for the translating adapters: parse an upstream byte stream into events
// (however the network split it) and encode events back to bytes. Pass-through paths never use this —
// their bytes go to the caller untouched.

export interface SseEvent {
  /** The `event:` field, when the stream names its events (Anthropic does, OpenAI does not). */
  event?: string;
  /** The `data:` lines joined with `\n`. */
  data: string;
}

const encoder = new TextEncoder();

/** Events as they complete; a trailing event without its blank line is delivered when the stream ends. */
export async function* parseSse(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of chunks) {
    buffer += decoder.decode(chunk, { stream: true });
    let boundary: { at: number; length: number } | undefined;
    while ((boundary = nextBoundary(buffer)) !== undefined) {
      const block = buffer.slice(0, boundary.at);
      buffer = buffer.slice(boundary.at + boundary.length);
      const ev = parseBlock(block);
      if (ev) yield ev;
    }
  }
  buffer += decoder.decode();
  const last = parseBlock(buffer);
  if (last) yield last;
}

function nextBoundary(buffer: string): { at: number; length: number } | undefined {
  const m = /\r\n\r\n|\n\n|\r\r/.exec(buffer);
  return m ? { at: m.index, length: m[0].length } : undefined;
}

function parseBlock(block: string): SseEvent | undefined {
  let event: string | undefined;
  const data: string[] = [];
  for (const line of block.split(/\r\n|\n|\r/)) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return undefined;
  return event === undefined ? { data: data.join('\n') } : { event, data: data.join('\n') };
}

/** `data: <json>\n\n`, OpenAI's framing. */
export function dataEvent(payload: unknown): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify(payload)}\n\n`);
}

/** `event: <name>\ndata: <json>\n\n`, Anthropic's framing. */
export function namedEvent(name: string, payload: unknown): Uint8Array {
  return encoder.encode(`event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`);
}

export const DONE_EVENT = encoder.encode('data: [DONE]\n\n');

/** A JSON object from an event's data, or undefined when it is not one (e.g. `[DONE]`). */
export function jsonData(ev: SseEvent): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(ev.data);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
