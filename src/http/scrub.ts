// No secret leaves through an outsider's words (docs/security.md "Secrets in answers and logs"): everything
// forwarded to a caller on an error path (an upstream's error message, an SSE error event, a header) or
// logged from a service's answer passes through a scrubber that redacts every configured secret — the
// provider keys' credentials, the guardrail rows' keys, the exporters' header tokens, the admin keys and the
// caller's own bearer token of this request — in each encoding an echo may use (src/util/redact.ts).
// Upstreams do echo credentials ("Incorrect API key provided: sk-…").
import type { Config } from '../config/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { credentialSecrets } from '../providers/credential-json.ts';
import { mintedTokens } from '../providers/token-cache.ts';
import {
  headerSecrets,
  joinNeedles,
  type Needles,
  needlesOf,
  NO_NEEDLES,
  redactSecrets,
  redactWith,
} from '../util/redact.ts';

export { base64Copies, REDACTED } from '../util/redact.ts';

/**
 * A scrubber: `text` with every secret redacted. With `maxChars`, the scrubbed text is then cut to that
 * many characters, and a tail the cut left that begins a secret (in any of its forms) is dropped too.
 */
export type Scrub = (text: string, maxChars?: number) => string;

/**
 * The secrets of config.yaml a scrubber knows besides the resources': the admin keys and the config
 * exporter's header values.
 */
export function configSecrets(cfg: {
  admin: Pick<Config['admin'], 'admin_keys'> & Partial<Pick<Config['admin'], 'write_keys'>>;
  observability: { tracing: { otlp: { headers: Record<string, string> } } };
}): string[] {
  return [
    ...cfg.admin.admin_keys,
    ...(cfg.admin.write_keys ?? []),
    ...headerSecrets(cfg.observability.tracing.otlp.headers),
  ];
}

/** The snapshot's secrets plus config.yaml's, computed once per snapshot (and per config list). */
const perSnapshot = new WeakMap<Snapshot, Needles>();
const perConfig = new WeakMap<readonly string[], Needles>();

function configuredNeedles(snapshot: Snapshot | undefined, fromConfig: readonly string[]): Needles {
  if (!snapshot) {
    let n = perConfig.get(fromConfig);
    if (!n) perConfig.set(fromConfig, n = needlesOf(fromConfig));
    return n;
  }
  let n = perSnapshot.get(snapshot);
  if (!n) {
    const set = new Set<string>(fromConfig);
    for (const k of snapshot.resources.provider_keys) {
      if (!k.api_key) continue;
      set.add(k.api_key);
      // A JSON credential's members (Bedrock, Vertex, Azure AAD): an upstream echoes one, never the document.
      for (const m of credentialSecrets(k.api_key)) set.add(m);
    }
    for (const g of snapshot.guardrails) for (const s of g.guardrail?.secrets ?? []) set.add(s);
    for (const m of snapshot.of('mcp_servers')) if (m.secret) set.add(m.secret);
    for (const e of snapshot.exporters) for (const s of headerSecrets(e.headers)) set.add(s);
    n = needlesOf(set);
    perSnapshot.set(snapshot, n);
  }
  return n;
}

/** A scrubber for one request: the configured secrets and the caller's token (when it sent one). */
export function scrubberFor(
  snapshot: Snapshot | undefined,
  fromConfig: readonly string[],
  callerToken: string | undefined,
): Scrub {
  // Tokens the gateway minted (Vertex, Azure AAD) come and go between snapshots: read per request.
  const extra = [...mintedTokens()];
  if (callerToken) extra.push(callerToken);
  const needles = joinNeedles(
    configuredNeedles(snapshot, fromConfig),
    extra.length > 0 ? needlesOf(extra) : NO_NEEDLES,
  );
  return (text, maxChars) => redactWith(text, needles, maxChars);
}

/** `text` with every occurrence of every secret in `secrets` (in each of its forms) redacted, then cut. */
export function scrubText(text: string, secrets: readonly string[], maxChars?: number): string {
  return redactSecrets(text, secrets, maxChars);
}
