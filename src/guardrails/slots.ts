// Where the text of a request and of an answer lives, per endpoint (docs/guardrails.md "What is scanned"):
// each piece is a slot that can be read and written back, so a mask rewrites the body in place before the
// upstream call (input) or before the caller reads the answer (output). Pure functions over parsed JSON.
import type { Segment } from './types.ts';

export type GuardedEndpoint =
  | 'chat'
  | 'completions'
  | 'embeddings'
  | 'messages'
  | 'responses'
  | 'audio_speech'
  | 'audio_transcriptions'
  | 'audio_translations'
  | 'images_generations'
  | 'images_edits'
  | 'rerank';

export interface Slot extends Segment {
  set(text: string): void;
}

type Json = Record<string, unknown>;

function isRecord(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function field(out: Slot[], obj: Json, key: string, role: Segment['role']): void {
  const v = obj[key];
  if (typeof v === 'string') out.push({ text: v, role, set: (t) => (obj[key] = t) });
}

/** A string, or an array of strings, at `obj[key]` (completions `prompt`, embeddings `input`). */
function strings(out: Slot[], obj: Json, key: string, role: Segment['role']): void {
  const v = obj[key];
  if (typeof v === 'string') field(out, obj, key, role);
  else if (Array.isArray(v)) {
    v.forEach((item, i) => {
      if (typeof item === 'string') out.push({ text: item, role, set: (t) => (v[i] = t) });
    });
  }
}

/** Every string inside a JSON value (a replayed `tool_use.input`), each its own slot, in document order. */
function stringsIn(out: Slot[], holder: Json | unknown[], key: string | number, role: Segment['role']): void {
  const v = (holder as Record<string | number, unknown>)[key];
  if (typeof v === 'string') {
    out.push({ text: v, role, set: (t) => ((holder as Record<string | number, unknown>)[key] = t) });
  } else if (Array.isArray(v)) v.forEach((_, i) => stringsIn(out, v, i, role));
  else if (isRecord(v)) { for (const k of Object.keys(v)) stringsIn(out, v, k, role); }
}

/**
 * `content` as a string, or its blocks the model reads: text (`text`, `input_text`, `output_text`), replayed
 * refusals, tool results, Anthropic `document` blocks with a text source and `search_result` blocks, and
 * replayed `tool_use` inputs.
 */
function content(out: Slot[], obj: Json, role: Segment['role']): void {
  const c = obj.content;
  if (typeof c === 'string') field(out, obj, 'content', role);
  else if (Array.isArray(c)) {
    for (const part of c) {
      if (!isRecord(part)) continue;
      if (part.type === 'text' || part.type === 'input_text' || part.type === 'output_text') {
        field(out, part, 'text', role);
      } else if (part.type === 'refusal') field(out, part, 'refusal', role);
      else if (part.type === 'tool_result') content(out, part, 'tool');
      else if (part.type === 'search_result') content(out, part, role);
      else if (part.type === 'document' && isRecord(part.source)) documentSource(out, part.source, role);
      else if (part.type === 'tool_use') stringsIn(out, part, 'input', 'assistant');
    }
  }
}

/** An Anthropic document's source: plain text (`data`), or content blocks; base64 and URL sources are not text. */
function documentSource(out: Slot[], source: Json, role: Segment['role']): void {
  if (source.type === 'text') field(out, source, 'data', role);
  else if (source.type === 'content') content(out, source, role);
}

/** Tool descriptions the model reads: `tools[].description` (messages, responses), `.function.description` (chat). */
function toolDescriptions(out: Slot[], body: Json): void {
  for (const t of Array.isArray(body.tools) ? body.tools : []) {
    if (!isRecord(t)) continue;
    field(out, t, 'description', 'system');
    if (isRecord(t.function)) field(out, t.function, 'description', 'system');
  }
}

/**
 * Tool calls, replayed (request) or answered: each one's name and arguments (AISIX scans the whole call), and
 * the legacy `function_call` a replayed assistant turn may still carry.
 */
function toolCalls(out: Slot[], msg: Json): void {
  const calls = Array.isArray(msg.tool_calls) ? msg.tool_calls : [];
  for (const call of [...calls, { function: msg.function_call }]) {
    if (!isRecord(call) || !isRecord(call.function)) continue;
    field(out, call.function, 'name', 'assistant');
    field(out, call.function, 'arguments', 'assistant');
  }
}

function roleOf(v: unknown): Segment['role'] {
  return v === 'system' || v === 'developer'
    ? 'system'
    : v === 'assistant'
    ? 'assistant'
    : v === 'tool'
    ? 'tool'
    : 'user';
}

/** The request's slots, in the order AISIX scans them. */
export function requestSlots(endpoint: GuardedEndpoint, body: Json): Slot[] {
  const out: Slot[] = [];
  switch (endpoint) {
    case 'chat':
      for (const m of Array.isArray(body.messages) ? body.messages : []) {
        if (!isRecord(m)) continue;
        content(out, m, roleOf(m.role));
        toolCalls(out, m);
        // A replayed assistant turn's reasoning goes back to the model with it (AISIX scans it too).
        field(out, m, 'reasoning_content', 'assistant');
      }
      if (isRecord(body.prediction)) content(out, body.prediction, 'assistant');
      toolDescriptions(out, body);
      break;
    case 'completions':
      strings(out, body, 'prompt', 'user');
      field(out, body, 'suffix', 'user');
      break;
    case 'embeddings':
      strings(out, body, 'input', 'user');
      break;
    // Audio, images and rerank (docs/media-endpoints.md): the text AISIX scans; a form's fields are strings.
    case 'audio_speech':
      field(out, body, 'input', 'user');
      break;
    case 'audio_transcriptions':
    case 'audio_translations':
    case 'images_generations':
    case 'images_edits':
      field(out, body, 'prompt', 'user');
      break;
    case 'rerank':
      field(out, body, 'query', 'user');
      if (Array.isArray(body.documents)) {
        body.documents.forEach((d, i, all) => {
          if (typeof d === 'string') out.push({ text: d, role: 'user', set: (t) => (all[i] = t) });
          else if (isRecord(d)) field(out, d, 'text', 'user');
        });
      }
      break;
    case 'messages':
      if (typeof body.system === 'string') field(out, body, 'system', 'system');
      else if (Array.isArray(body.system)) content(out, { content: body.system }, 'system');
      for (const m of Array.isArray(body.messages) ? body.messages : []) {
        if (isRecord(m)) content(out, m, roleOf(m.role));
      }
      toolDescriptions(out, body);
      break;
    case 'responses':
      field(out, body, 'instructions', 'system');
      if (typeof body.input === 'string') field(out, body, 'input', 'user');
      else if (Array.isArray(body.input)) {
        for (const item of body.input) {
          if (!isRecord(item)) continue;
          if (item.type === 'function_call') field(out, item, 'arguments', 'assistant');
          else if (item.type === 'function_call_output') field(out, item, 'output', 'tool');
          else content(out, item, roleOf(item.role));
        }
      }
      toolDescriptions(out, body);
      break;
  }
  return out;
}

/** A whole (non-stream) answer's slots. */
export function answerSlots(endpoint: GuardedEndpoint, body: Json): Slot[] {
  const out: Slot[] = [];
  switch (endpoint) {
    case 'chat':
      for (const c of Array.isArray(body.choices) ? body.choices : []) {
        if (!isRecord(c) || !isRecord(c.message)) continue;
        field(out, c.message, 'reasoning_content', 'assistant');
        field(out, c.message, 'content', 'assistant');
        toolCalls(out, c.message);
      }
      break;
    case 'completions':
      for (const c of Array.isArray(body.choices) ? body.choices : []) {
        if (isRecord(c)) field(out, c, 'text', 'assistant');
      }
      break;
    case 'messages':
      // Thinking is scanned on answers only: a replayed thinking block is signed, and a mask would break it.
      for (const b of Array.isArray(body.content) ? body.content : []) {
        if (isRecord(b) && b.type === 'thinking') field(out, b, 'thinking', 'assistant');
      }
      content(out, body, 'assistant');
      break;
    case 'responses':
      for (const item of Array.isArray(body.output) ? body.output : []) {
        if (!isRecord(item)) continue;
        if (item.type === 'function_call') field(out, item, 'arguments', 'assistant');
        else content(out, item, 'assistant');
      }
      break;
    case 'embeddings':
      break;
  }
  return out;
}

/** Writes the chain's segments back into the slots they came from; true when anything changed. */
export function writeBack(slots: readonly Slot[], segments: readonly Segment[]): boolean {
  let changed = false;
  for (let i = 0; i < slots.length; i++) {
    const t = segments[i]?.text;
    if (t !== undefined && t !== slots[i]!.text) {
      slots[i]!.set(t);
      changed = true;
    }
  }
  return changed;
}
