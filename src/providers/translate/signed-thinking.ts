// Claude's signed thinking across the Responses ⇄ chat ⇄ Messages translation (docs/translation.md "Signed
// thinking on the Responses path"): a private field on the chat assistant message (and stream delta) that only
// the Anthropic translation reads, and the `encrypted_content` a Responses caller gets and sends back.
import { base64Decode, base64Encode, encodeText } from '../../util/bytes.ts';
import { isRecord, type Json } from './shared.ts';

/**
 * The chat assistant message's (and delta's) private field: Claude's `thinking` / `redacted_thinking` blocks as
 * Anthropic sent them. Set only on a chat answer made for a translation; sent only to an Anthropic-wire target.
 */
export const SIGNED_THINKING = 'sluice_signed_thinking';

/** What marks Sluice's own `encrypted_content`: the family that can take it back, then the blocks as base64 JSON. */
const PREFIX = 'sluice.anthropic.v1.';

/** The blocks a reasoning item's `encrypted_content` carries back to Claude. */
export function encryptedContentOf(blocks: Json[]): string {
  return PREFIX + base64Encode(encodeText(JSON.stringify(blocks)));
}

/**
 * What an `encrypted_content` holds: Sluice's thinking blocks, `'foreign'` (another provider's opaque state,
 * OpenAI's own), or undefined when there is none.
 */
export function thinkingOfEncrypted(content: unknown): Json[] | 'foreign' | undefined {
  if (typeof content !== 'string' || content === '') return undefined;
  if (!content.startsWith(PREFIX)) return 'foreign';
  try {
    const blocks: unknown = JSON.parse(new TextDecoder().decode(base64Decode(content.slice(PREFIX.length))));
    return Array.isArray(blocks) ? signedBlocks(blocks) : 'foreign';
  } catch {
    return 'foreign';
  }
}

/** Whether an `encrypted_content` is Sluice's own. */
export function isSluiceEncrypted(content: unknown): boolean {
  return typeof content === 'string' && content.startsWith(PREFIX);
}

/** The thinking blocks of a list, in the shapes Anthropic takes back: anything else is left out. */
export function signedBlocks(blocks: unknown): Json[] {
  if (!Array.isArray(blocks)) return [];
  const out: Json[] = [];
  for (const b of blocks) {
    if (!isRecord(b)) continue;
    if (
      b.type === 'thinking' && typeof b.thinking === 'string' && typeof b.signature === 'string' && b.signature !== ''
    ) {
      out.push({ type: 'thinking', thinking: b.thinking, signature: b.signature });
    } else if (b.type === 'redacted_thinking' && typeof b.data === 'string' && b.data !== '') {
      out.push({ type: 'redacted_thinking', data: b.data });
    }
  }
  return out;
}
