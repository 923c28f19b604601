// No secret leaves through an upstream's words: everything forwarded to a caller on an error path (an
// upstream's error message, an SSE error event, a header) passes through a scrubber that replaces every
// configured secret — the provider keys' credentials, the admin keys and the caller's own bearer token of
// this request — with `[redacted]`. Upstreams do echo credentials ("Incorrect API key provided: sk-…").
import type { Snapshot } from '../resources/snapshot.ts';
import { credentialSecrets } from '../providers/credential-json.ts';
import { mintedTokens } from '../providers/token-cache.ts';

export const REDACTED = '[redacted]';

/** Shorter strings are not scrubbed: they would redact ordinary words. */
const MIN_SECRET_LENGTH = 6;

/** The snapshot's provider credentials plus the deployment's admin keys, computed once per snapshot. */
const perSnapshot = new WeakMap<Snapshot, readonly string[]>();

function configuredSecrets(snapshot: Snapshot | undefined, adminKeys: readonly string[]): readonly string[] {
  if (!snapshot) return withEncodings(adminKeys);
  let s = perSnapshot.get(snapshot);
  if (!s) {
    const set = new Set<string>();
    for (const k of snapshot.resources.provider_keys) {
      if (!k.api_key) continue;
      set.add(k.api_key);
      // A JSON credential's members (Bedrock, Vertex, Azure AAD): an upstream echoes one, never the document.
      for (const m of credentialSecrets(k.api_key)) set.add(m);
    }
    for (const k of adminKeys) set.add(k);
    s = withEncodings([...set]);
    perSnapshot.set(snapshot, s);
  }
  return s;
}

const encodedOf = new WeakMap<readonly string[], readonly string[]>();

/**
 * The secrets long enough to scrub, each with its base64 and base64url copies (an upstream may echo a
 * credential it received encoded, e.g. in a decoded-then-re-encoded header), longest first. Only a copy
 * of the secret alone is found: one encoded inside a larger value (`user:secret`) has other characters.
 */
function withEncodings(secrets: readonly string[]): readonly string[] {
  if (secrets.length === 0) return secrets;
  const memo = encodedOf.get(secrets);
  if (memo) return memo;
  const set = new Set<string>();
  for (const x of secrets) {
    if (x.length < MIN_SECRET_LENGTH) continue;
    set.add(x);
    for (const e of base64Copies(x)) set.add(e);
  }
  const out = [...set].sort((a, b) => b.length - a.length);
  encodedOf.set(secrets, out);
  return out;
}

const utf8 = new TextEncoder();

/** Base64 (padded and not) and base64url (unpadded) of the secret's UTF-8 bytes. */
export function base64Copies(secret: string): string[] {
  let binary = '';
  for (const b of utf8.encode(secret)) binary += String.fromCharCode(b);
  const padded = btoa(binary);
  const bare = padded.replace(/=+$/, '');
  const url = bare.replace(/\+/g, '-').replace(/\//g, '_');
  return [padded, bare, url];
}

export type Scrub = (text: string) => string;

/** A scrubber for one request: the configured secrets and the caller's token (when it sent one). */
export function scrubberFor(
  snapshot: Snapshot | undefined,
  adminKeys: readonly string[],
  callerToken: string | undefined,
): Scrub {
  const configured = configuredSecrets(snapshot, adminKeys);
  // Tokens the gateway minted (Vertex, Azure AAD) come and go between snapshots: read per request.
  const extra = mintedTokens().filter((t) => t.length >= MIN_SECRET_LENGTH && !configured.includes(t));
  if (callerToken && callerToken.length >= MIN_SECRET_LENGTH && !configured.includes(callerToken)) {
    extra.push(callerToken);
  }
  const secrets = extra.length > 0 ? [...configured, ...extra].sort((a, b) => b.length - a.length) : configured;
  return (text) => scrubText(text, secrets);
}

/** `text` with every occurrence of every secret (longest first, so one that contains another goes whole) redacted. */
export function scrubText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (out.includes(s)) out = out.split(s).join(REDACTED);
  return out;
}
