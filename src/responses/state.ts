// A Responses request continued from stored state (docs/routing.md "Responses state"): `previous_response_id`
// becomes the stored input and output ahead of the new input, each `item_reference` the item it names. What
// the store does not hold is left in the body, where OpenAI resolves its own ids and a translation refuses
// with a 400 naming the id. Also: the response a translated stream ended with, read from its terminal event.
import type { Item, StoredResponse } from './store.ts';

type Json = Record<string, unknown>;

/** The lookups a resolution makes, in the caller key's entries. */
export interface StateLookup {
  response(id: string): Promise<StoredResponse | undefined>;
  item(id: string): Promise<Item | undefined>;
}

/** Whether a Responses request refers to stored state at all (else no store is touched). */
export function refersToState(body: Json): boolean {
  if (typeof body.previous_response_id === 'string') return true;
  return Array.isArray(body.input) && body.input.some(isReference);
}

function isReference(v: unknown): v is { type: 'item_reference'; id: string } {
  return typeof v === 'object' && v !== null && (v as Json).type === 'item_reference' &&
    typeof (v as Json).id === 'string';
}

/**
 * The body with what the store holds put in place: the previous response's input and output ahead of `input`
 * (the field then removed), each known `item_reference` replaced by its item. Unknown ids stay as they were.
 */
export async function resolveState(body: Json, lookup: StateLookup): Promise<Json> {
  const prevId = typeof body.previous_response_id === 'string' ? body.previous_response_id : undefined;
  const input = inputItems(body.input);
  const [prev, items] = await Promise.all([
    prevId === undefined ? undefined : lookup.response(prevId),
    Promise.all(input.map((i) => (isReference(i) ? lookup.item(i.id) : undefined))),
  ]);
  if (!prev && !items.some((i) => i !== undefined)) return body;
  const out: Json = { ...body };
  const resolved = input.map((i, n) => items[n] ? replayable(items[n]) : i);
  if (prev) {
    delete out.previous_response_id;
    out.input = [...prev.input, ...prev.output.map(replayable), ...resolved];
  } else out.input = resolved;
  return out;
}

/** `input` as items: a string is one user message. */
export function inputItems(input: unknown): unknown[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  return Array.isArray(input) ? input : [];
}

/** A stored output item as input: without the id and status the gateway minted (no upstream knows them). */
function replayable(item: Item): Item {
  const { id: _id, status: _status, ...rest } = item;
  return rest;
}

/** The JSON objects a stored context holds (strings become user messages). */
export function contextItems(input: unknown): Item[] {
  return inputItems(input).map((i) => (typeof i === 'string' ? { role: 'user', content: i } : i))
    .filter((i): i is Item => typeof i === 'object' && i !== null && !Array.isArray(i));
}

const TERMINAL = ['event: response.completed\n', 'event: response.incomplete\n'];

/**
 * Reads a Responses SSE body as it passes and keeps the `response` of its terminal event (`response.completed`
 * or `response.incomplete`); other events are let go as soon as their blank line is seen.
 */
export class TerminalEventReader {
  private readonly decoder = new TextDecoder();
  private tail = '';
  response: Json | undefined;

  push(bytes: Uint8Array): void {
    this.tail += this.decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = this.tail.indexOf('\n\n')) >= 0) {
      const block = this.tail.slice(0, end + 1);
      this.tail = this.tail.slice(end + 2);
      if (TERMINAL.some((t) => block.startsWith(t))) this.read(block);
    }
  }

  private read(block: string): void {
    const data = block.split('\n').find((l) => l.startsWith('data: '));
    if (!data) return;
    try {
      const j = JSON.parse(data.slice(6)) as Json;
      const r = j.response;
      if (typeof r === 'object' && r !== null && !Array.isArray(r)) this.response = r as Json;
    } catch {
      // not JSON: nothing to keep
    }
  }
}
