// The text a streamed answer carries, per frame and endpoint (docs/guardrails.md "Streams"): content and
// reasoning deltas on their channel (a choice, its reasoning, a content block) that a mask can rewrite, and
// tool-call fragments that are scanned only. Pure functions over one SSE frame.
import type { GuardedEndpoint } from './slots.ts';

/** One SSE frame: its raw text (kept byte for byte unless rewritten) and its parsed `data:` JSON. */
export interface Frame {
  raw: string;
  event: string | undefined;
  data: string | undefined;
  json: Record<string, unknown> | undefined;
}

export interface Delta {
  channel: string;
  text: string;
  set(text: string): void;
}

type Json = Record<string, unknown>;
function isRecord(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function parseFrame(raw: string): Frame {
  let event: string | undefined;
  let data: string | undefined;
  for (const line of raw.split(/\r?\n/)) {
    if (line.startsWith('event:')) event = line.slice(6).trim();
    else if (line.startsWith('data:')) {
      const d = line.slice(5).replace(/^ /, '');
      data = data === undefined ? d : `${data}\n${d}`;
    }
  }
  let json: Json | undefined;
  if (data !== undefined && data !== '[DONE]') {
    try {
      const v: unknown = JSON.parse(data);
      if (isRecord(v)) json = v;
    } catch {
      // not JSON: passed through untouched, carries no text
    }
  }
  return { raw, event, data, json };
}

/** The frame with its JSON re-serialised (after a delta was rewritten). */
export function serialise(f: Frame): string {
  const event = f.event !== undefined ? `event: ${f.event}\n` : '';
  return `${event}data: ${JSON.stringify(f.json)}\n\n`;
}

/** Whether the frame ends the stream on its wire (`data: [DONE]`, Anthropic's `message_stop`). */
export function isTerminal(f: Frame): boolean {
  return f.data === '[DONE]' || f.json?.type === 'message_stop' || f.json?.type === 'response.completed';
}

/** The frame's content deltas (maskable) and its tool-call text (scanned only). */
export function deltasOf(endpoint: GuardedEndpoint, f: Frame): { deltas: Delta[]; tool: string } {
  const deltas: Delta[] = [];
  let tool = '';
  const j = f.json;
  if (!j) return { deltas, tool };
  const str = (obj: Json, key: string, channel: string) => {
    const v = obj[key];
    if (typeof v === 'string') deltas.push({ channel, text: v, set: (t) => (obj[key] = t) });
  };
  if (endpoint === 'chat' || endpoint === 'completions') {
    for (const c of Array.isArray(j.choices) ? j.choices : []) {
      if (!isRecord(c)) continue;
      const ch = `choice:${String(c.index ?? 0)}`;
      if (endpoint === 'completions') {
        str(c, 'text', ch);
        continue;
      }
      if (!isRecord(c.delta)) continue;
      str(c.delta, 'reasoning_content', `reasoning:${String(c.index ?? 0)}`);
      str(c.delta, 'content', ch);
      for (const t of Array.isArray(c.delta.tool_calls) ? c.delta.tool_calls : []) {
        if (!isRecord(t) || !isRecord(t.function)) continue;
        if (typeof t.function.name === 'string') tool += t.function.name;
        if (typeof t.function.arguments === 'string') tool += t.function.arguments;
      }
    }
  } else if (endpoint === 'messages') {
    if (j.type === 'content_block_delta' && isRecord(j.delta)) {
      if (j.delta.type === 'text_delta') str(j.delta, 'text', `block:${String(j.index ?? 0)}`);
      else if (j.delta.type === 'thinking_delta') str(j.delta, 'thinking', `block:${String(j.index ?? 0)}`);
      else if (j.delta.type === 'input_json_delta' && typeof j.delta.partial_json === 'string') {
        tool += j.delta.partial_json;
      }
    }
  } else if (endpoint === 'responses') {
    if (j.type === 'response.output_text.delta') {
      str(j, 'delta', `output:${String(j.output_index ?? 0)}:${String(j.content_index ?? 0)}`);
    } else if (j.type === 'response.function_call_arguments.delta' && typeof j.delta === 'string') tool += j.delta;
  }
  return { deltas, tool };
}
