// Local token counts: for an answer whose upstream reported none (relays, self-hosted servers), for the rate
// limits and telemetry only, never written into the caller's answer, and marked `estimated`; and for what a
// translation must state before the upstream has (`message_start`, count_tokens off Anthropic's wire,
// docs/translation.md "Estimated tokens"). OpenAI's BPE encodings (tokenizer.ts over js-tiktoken's rank files),
// pure JavaScript on every runtime: `cl100k_base` by default (AISIX's choice for every model that is not OpenAI's
// own), `o200k_base` where a model's capabilities name it. A table is built on its first use, or after the
// gateway starts serving (`warmTokenTables`), in slices that never hold the event loop long; an answer the
// caller is waiting for is counted at once (`built-only`), approximated until its table is built
// (docs/aisix-compatibility.md "Token estimation").
import { isRecord, type Json } from './translate/shared.ts';
import { buildEncoder } from './tokenizer.ts';
import type { Endpoint, TokenCounts } from './types.ts';

/** What a built table gives: the number of tokens of a text. */
interface BpeCounter {
  count(text: string): number;
}

export type Encoding = 'cl100k_base' | 'o200k_base';

interface Table {
  building: Promise<BpeCounter>;
  built?: BpeCounter;
}

const tables = new Map<Encoding, Table>();
let approximateOnly = false;

/**
 * Never build a table: every count is the approximation. For a runtime whose requests have a few ms of CPU
 * (Workers), where a build would cost more than a request may spend.
 */
export function approximateTokenCounts(): void {
  approximateOnly = true;
}

/** Begins building the default encoding's table, off the requests' path (after the gateway serves). */
export function warmTokenTables(): void {
  if (!approximateOnly) table('cl100k_base');
}

function table(encoding: Encoding): Table {
  let t = tables.get(encoding);
  if (!t) {
    const entry: Table = {
      building: buildEncoder(encoding).then((enc) => entry.built = { count: (text) => enc.encode(text).length }),
    };
    // A failed build is seen by whoever awaits it; a count made now stays approximated.
    entry.building.catch(() => {});
    tables.set(encoding, t = entry);
  }
  return t;
}

/** The encoding's table, waiting for its build; undefined where counts are approximated. */
async function builtTable(encoding: Encoding): Promise<BpeCounter | undefined> {
  return approximateOnly ? undefined : await table(encoding).building;
}

/** The encoding's table if it is built (else its build begins); undefined meanwhile. */
function readyTable(encoding: Encoding): BpeCounter | undefined {
  return approximateOnly ? undefined : table(encoding).built;
}

/**
 * How a count may be made. `built-only`: with the tokenizer only when its table is already built, else at 4
 * characters per token, so the count never waits on a build: what a caller is waiting for (`message_start`,
 * count_tokens) and the count of a stream whose caller left (docs/translation.md "Interrupted streams").
 */
export type Counting = 'full' | 'built-only';

/** The encoding's table as `counting` allows: waiting for its build, or only if built. */
async function counterFor(encoding: Encoding, counting: Counting): Promise<BpeCounter | undefined> {
  return counting === 'built-only' ? readyTable(encoding) : await builtTable(encoding);
}

/** Text beyond this many characters per count is approximated (4 per token) rather than encoded. */
const MAX_ENCODED = 1 << 20;
const BYTES_PER_TOKEN = 4;

/**
 * A run without whitespace this long is approximated (4 characters per token) rather than encoded: the
 * BPE merge of one pre-tokenized piece costs more than quadratic time in its length, so a long run (a base64
 * blob, a repeated character) would hold the event loop.
 */
const LONG_RUN = /\S{65,}/g;

/** BPE tokens of `text` (waiting for the table); special-token spellings count as the plain text they are. */
export async function estimateTokens(
  text: string,
  encoding: Encoding = 'cl100k_base',
  counting: Counting = 'full',
): Promise<number> {
  if (text === '') return 0;
  return countText(await counterFor(encoding, counting), text);
}

/**
 * Tokens of `text` at once, never waiting for a build: `cl100k_base` when its table is built, else 4 characters
 * per token (a count made while a record is being closed, the A2A calls' estimate).
 */
export function countTokensNow(text: string): number {
  return text === '' ? 0 : countText(readyTable('cl100k_base'), text);
}

/** Tokens of `text` with `counter`, or approximated (4 characters per token) without one. */
function countText(counter: BpeCounter | undefined, text: string): number {
  if (!counter) return Math.ceil(text.length / BYTES_PER_TOKEN);
  const head = text.length > MAX_ENCODED ? text.slice(0, MAX_ENCODED) : text;
  const rest = text.length - head.length;
  return encodedLength(counter, head) + Math.ceil(rest / BYTES_PER_TOKEN);
}

function encodedLength(counter: BpeCounter, text: string): number {
  let n = 0;
  let at = 0;
  for (const m of text.matchAll(LONG_RUN)) {
    if (m.index > at) n += counter.count(text.slice(at, m.index));
    n += Math.ceil(m[0].length / BYTES_PER_TOKEN);
    at = m.index + m[0].length;
  }
  return at < text.length ? n + counter.count(at === 0 ? text : text.slice(at)) : n;
}

// ---- prompts ---------------------------------------------------------------------------------------------

/** OpenAI's accounting of a chat prompt (AISIX's constants): per message, per name, reply priming, tools. */
const PER_MESSAGE = 3;
const PER_NAME = 1;
const REPLY_PRIMING = 3;
const TOOLS_OVERHEAD = 9;
const TOOLS_WITH_SYSTEM = -4;
const IMAGE_LOW = 85;
const IMAGE_HIGH = 250;

/** What a prompt is made of, for counting: texts to encode and fixed costs already known. */
interface PromptParts {
  texts: string[];
  fixed: number;
}

function textsOf(content: unknown, parts: PromptParts): void {
  if (typeof content === 'string') {
    parts.texts.push(content);
    return;
  }
  if (!Array.isArray(content)) return;
  for (const p of content) {
    if (typeof p === 'string') parts.texts.push(p);
    if (!isRecord(p)) continue;
    if (typeof p.text === 'string') parts.texts.push(p.text);
    else if (p.type === 'image_url' || p.type === 'image' || p.type === 'input_image') {
      const detail = isRecord(p.image_url) ? p.image_url.detail : p.detail;
      parts.fixed += detail === 'low' ? IMAGE_LOW : IMAGE_HIGH;
    } else if (p.type === 'tool_result') textsOf(p.content, parts);
    else if (p.type === 'tool_use') parts.texts.push(String(p.name ?? ''), JSON.stringify(p.input ?? {}));
  }
}

function messageParts(messages: unknown, parts: PromptParts): boolean {
  let system = false;
  for (const m of Array.isArray(messages) ? messages : []) {
    if (!isRecord(m)) continue;
    parts.fixed += PER_MESSAGE;
    if (typeof m.role === 'string') parts.texts.push(m.role);
    system ||= m.role === 'system' || m.role === 'developer';
    textsOf(m.content, parts);
    if (typeof m.name === 'string') {
      parts.fixed += PER_NAME;
      parts.texts.push(m.name);
    }
    for (const c of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
      if (isRecord(c) && isRecord(c.function)) {
        parts.texts.push(String(c.function.name ?? ''), String(c.function.arguments ?? ''));
      }
    }
    // Responses input items: function calls and their outputs.
    if (typeof m.arguments === 'string') parts.texts.push(String(m.name ?? ''), m.arguments);
    if (typeof m.output === 'string') parts.texts.push(m.output);
  }
  return system;
}

function toolParts(tools: unknown, system: boolean, parts: PromptParts): void {
  if (!Array.isArray(tools) || tools.length === 0) return;
  parts.fixed += TOOLS_OVERHEAD + (system ? TOOLS_WITH_SYSTEM : 0);
  for (const t of tools) parts.texts.push(JSON.stringify(isRecord(t) && isRecord(t.function) ? t.function : t));
}

function promptParts(endpoint: Endpoint, body: Json): PromptParts {
  const parts: PromptParts = { texts: [], fixed: 0 };
  if (endpoint === 'completions' || endpoint === 'embeddings') {
    const input = endpoint === 'completions' ? body.prompt : body.input;
    for (const t of Array.isArray(input) ? input : [input]) if (typeof t === 'string') parts.texts.push(t);
    return parts;
  }
  let system = false;
  if (endpoint === 'responses') {
    if (typeof body.instructions === 'string') {
      system = true;
      parts.fixed += PER_MESSAGE;
      parts.texts.push(body.instructions);
    }
    if (typeof body.input === 'string') {
      parts.fixed += PER_MESSAGE;
      parts.texts.push(body.input);
    } else system = messageParts(body.input, parts) || system;
  } else {
    if (body.system !== undefined) {
      system = true;
      parts.fixed += PER_MESSAGE;
      textsOf(body.system, parts);
    }
    system = messageParts(body.messages, parts) || system;
  }
  toolParts(body.tools, system, parts);
  parts.fixed += REPLY_PRIMING;
  return parts;
}

/** The estimated input tokens of a request body of `endpoint`, waiting for the encoding's table. */
export async function estimatePromptTokens(
  endpoint: Endpoint,
  body: Json,
  encoding: Encoding = 'cl100k_base',
  counting: Counting = 'full',
): Promise<number> {
  return promptTokens(promptParts(endpoint, body), await counterFor(encoding, counting), encoding);
}

function promptTokens(parts: PromptParts, counter: BpeCounter | undefined, encoding: Encoding): number {
  let n = parts.fixed;
  for (const t of parts.texts) n += counter ? promptPieceTokens(counter, t, encoding) : countText(undefined, t);
  return n;
}

/** Shorter prompt pieces are cheaper to encode again than to keep. */
const MIN_KEPT_PIECE = 512;
/** Characters of prompt pieces kept with their counts, per encoding. */
const KEPT_CHARS = 4 << 20;

/**
 * Prompt pieces counted lately, least recently used first out: an agent resends its system prompt, tools and
 * history on every turn, and encoding them again would hold the event loop for each request
 * (docs/translation.md "Estimated tokens").
 */
class PieceCounts {
  private readonly counts = new Map<string, number>();
  private chars = 0;

  get(text: string): number | undefined {
    const n = this.counts.get(text);
    if (n !== undefined) {
      this.counts.delete(text);
      this.counts.set(text, n);
    }
    return n;
  }

  set(text: string, n: number): void {
    if (text.length > KEPT_CHARS / 4 || this.counts.has(text)) return;
    this.counts.set(text, n);
    this.chars += text.length;
    for (const old of this.counts.keys()) {
      if (this.chars <= KEPT_CHARS) break;
      this.counts.delete(old);
      this.chars -= old.length;
    }
  }
}

const kept = new Map<Encoding, PieceCounts>();

function promptPieceTokens(counter: BpeCounter, text: string, encoding: Encoding): number {
  if (text.length < MIN_KEPT_PIECE) return countText(counter, text);
  let cache = kept.get(encoding);
  if (!cache) kept.set(encoding, cache = new PieceCounts());
  const known = cache.get(text);
  if (known !== undefined) return known;
  const n = countText(counter, text);
  cache.set(text, n);
  return n;
}

/**
 * The reported counts with each zero counter (input, output) filled by its estimate; an upstream's non-zero
 * number always wins, and cache and reasoning counts are never estimated.
 */
export function fillMissing(
  reported: TokenCounts | undefined,
  estimate: { input: () => Promise<number>; output: () => Promise<number> },
): Promise<TokenCounts> {
  const r = reported ?? { input: 0, output: 0 };
  if (r.input > 0 && r.output > 0) return Promise.resolve(r);
  return Promise.all([r.input > 0 ? r.input : estimate.input(), r.output > 0 ? r.output : estimate.output()]).then(
    ([input, output]) => ({ ...r, input, output, estimated: true }),
  );
}
