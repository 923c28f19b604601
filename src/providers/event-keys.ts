// The keys the stream edits look for in an SSE event's bytes, found in one pass without decoding. The usage
// filter (injected-usage.ts) and the vendor quirks (openai-quirks.ts) run on the same event one after the
// other (sse-edit.ts joins them) and share the pass.
import { hasAt } from '../util/bytes.ts';

/** A `"usage"` key whose value is an object. */
export const HAS_USAGE_OBJECT = 1;
/** A vendor quirk's key: `"reasoning"` or `"prompt_cache_hit_tokens"`. */
export const HAS_QUIRK = 2;

/** The vendor quirks' keys, quoted as they appear in JSON (openai-quirks.ts tests text for them too). */
export const QUIRK_KEYS = ['"reasoning"', '"prompt_cache_hit_tokens"'] as const;

const encoder = new TextEncoder();
const USAGE = encoder.encode('"usage"');
const [REASONING, CACHE_HITS] = QUIRK_KEYS.map((k) => encoder.encode(k)) as [Uint8Array, Uint8Array];

let lastBytes: Uint8Array | undefined;
let lastKeys = 0;

/** Which of the keys above `b` holds, as bits; asked again for the same array, the pass is not repeated. */
export function eventKeys(b: Uint8Array): number {
  if (b !== lastBytes) {
    lastKeys = scan(b);
    lastBytes = b;
  }
  return lastKeys;
}

function scan(b: Uint8Array): number {
  let keys = 0;
  for (let i = 0; i < b.length; i++) {
    if (b[i] !== 34 /* " */) continue;
    const c = b[i + 1];
    if (c === 117 /* u */) {
      if (hasAt(b, i, USAGE) && objectAfterKey(b, i + USAGE.length)) keys |= HAS_USAGE_OBJECT;
    } else if (c === 114 /* r */) {
      if (hasAt(b, i, REASONING)) keys |= HAS_QUIRK;
    } else if (c === 112 /* p */) {
      if (hasAt(b, i, CACHE_HITS)) keys |= HAS_QUIRK;
    }
  }
  return keys;
}

/** Whether `: {` (any JSON whitespace around the colon) follows at `i`. */
function objectAfterKey(b: Uint8Array, i: number): boolean {
  i = skipSpace(b, i);
  if (b[i] !== 0x3a /* : */) return false;
  return b[skipSpace(b, i + 1)] === 0x7b /* { */;
}

function skipSpace(b: Uint8Array, i: number): number {
  while (b[i] === 0x20 || b[i] === 0x09 || b[i] === 0x0a || b[i] === 0x0d) i++;
  return i;
}
