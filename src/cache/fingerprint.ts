// What makes two chat requests "the same question" to the response cache (docs/cache.md "Fingerprint"):
// AISIX's rules (`aisix-cache` key.rs) — model as sent, messages by role and content, `temperature`/`top_p`
// quantised to thousandths, every other body member canonical — under the matched policy's scope. The hash
// is Sluice's own (AISIX's is Rust's SipHash, not a cross-language format): SHA-256, 16 hex characters.
import { canonicalJson, sha256HexOf, type Sha256Stream } from '../util/crypto.ts';
import type { CachePolicy } from '../resources/schema.ts';

/** Body members the fingerprint reads on their own; every other member joins it canonically. */
const OWN = new Set(['model', 'messages', 'temperature', 'top_p', 'max_tokens', 'stream']);

/**
 * A float in thousandths, truncated, as AISIX computes it in `f32` (so the buckets match its):
 * negatives and NaN are 0; a value that is not a number is kept as canonical JSON.
 */
export function quantiseMilli(v: unknown): number | string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number') return `j:${canonicalJson(v)}`;
  if (Number.isNaN(v) || v < 0 || Object.is(v, -0)) return 0;
  const scaled = Math.fround(Math.fround(v) * 1000);
  return scaled >= 0xffff_ffff ? 0xffff_ffff : Math.trunc(scaled);
}

/**
 * One message as the fingerprint sees it: `t:` plain text, `b:` a block array (canonical JSON), `j:` the
 * whole message when it carries more than role and content (`name`, `tool_call_id`, tool calls, …).
 */
export function messagePart(m: unknown): [string, string] {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return ['', `j:${canonicalJson(m)}`];
  const msg = m as Record<string, unknown>;
  const role = typeof msg.role === 'string' ? msg.role : '';
  for (const k in msg) {
    if (k !== 'role' && k !== 'content' && msg[k] !== undefined) return [role, `j:${canonicalJson(msg)}`];
  }
  const c = msg.content;
  if (typeof c === 'string') return [role, `t:${c}`];
  return [role, `b:${canonicalJson(c ?? null)}`];
}

/** The policy part of both fingerprints: id, generation, and the caller's key under `scope: api_key`. */
export function scopeOf(policy: CachePolicy, apiKeyId: string): string[] {
  const parts = [policy.id, String(policy.purge_generation)];
  if (policy.scope === 'api_key') parts.push(apiKeyId);
  return parts;
}

/** Everything of the request except its messages, in a fixed order (the semantic partition reads it too). */
function paramsOf(body: Record<string, unknown>): unknown[] {
  const extras: string[] = [];
  for (const k of Object.keys(body).sort()) {
    if (!OWN.has(k) && body[k] !== undefined) extras.push(k, canonicalJson(body[k]));
  }
  const maxTokens = body.max_tokens === undefined ? null : canonicalJson(body.max_tokens);
  return [
    typeof body.model === 'string' ? body.model : canonicalJson(body.model ?? null),
    quantiseMilli(body.temperature),
    quantiseMilli(body.top_p),
    maxTokens,
    extras,
  ];
}

function hash16(parts: unknown[], native: (() => Sha256Stream) | undefined): string | Promise<string> {
  const hex = sha256HexOf(JSON.stringify(parts), native);
  return typeof hex === 'string' ? hex.slice(0, 16) : hex.then((h) => h.slice(0, 16));
}

/**
 * The exact-match key of a chat completions body under a policy scope: 16 lowercase hex characters. `native` is
 * the platform's SHA-256 (the same digest, synchronously); without it, Web Crypto's.
 */
export function exactFingerprint(
  body: Record<string, unknown>,
  scope: readonly string[],
  native?: () => Sha256Stream,
): string | Promise<string> {
  const messages = Array.isArray(body.messages) ? body.messages.map(messagePart) : [];
  return hash16(['exact', scope, paramsOf(body), messages], native);
}

/**
 * The semantic partition: the scope and every parameter except the messages, plus the embedding model's
 * identity (id, upstream model name, dimensions) — a changed embedding model orphans old vectors.
 */
export function partitionFingerprint(
  body: Record<string, unknown>,
  scope: readonly string[],
  embedder: { id: string; modelName: string; dimensions: number },
  native?: () => Sha256Stream,
): string | Promise<string> {
  return hash16(['partition', scope, paramsOf(body), embedder.id, embedder.modelName, embedder.dimensions], native);
}

/**
 * The text the semantic layer embeds: one `role: content` line per message, `\` and newlines escaped; undefined
 * when a message is not plain text (a non-`text` block, `name`, `tool_call_id`, any other member) or no
 * message has non-blank text — such requests use the exact layer only.
 */
export function semanticText(messages: unknown): string | undefined {
  if (!Array.isArray(messages) || messages.length === 0) return undefined;
  const lines: string[] = [];
  let someText = false;
  for (const m of messages) {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) return undefined;
    const msg = m as Record<string, unknown>;
    for (const k in msg) if (k !== 'role' && k !== 'content' && msg[k] !== undefined) return undefined;
    if (typeof msg.role !== 'string') return undefined;
    const text = plainText(msg.content);
    if (text === undefined) return undefined;
    if (text.trim() !== '') someText = true;
    lines.push(`${msg.role}: ${text.replace(/\\/g, '\\\\').replace(/\r?\n/g, '\\n')}`);
  }
  return someText ? lines.join('\n') : undefined;
}

/** A string, or an array of `{type: "text", text}` blocks joined by newlines; anything else is not plain. */
function plainText(c: unknown): string | undefined {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return undefined;
  const parts: string[] = [];
  for (const b of c) {
    if (typeof b !== 'object' || b === null) return undefined;
    const block = b as Record<string, unknown>;
    if (block.type !== 'text' || typeof block.text !== 'string') return undefined;
    for (const k in block) if (k !== 'type' && k !== 'text') return undefined;
    parts.push(block.text);
  }
  return parts.join('\n');
}
