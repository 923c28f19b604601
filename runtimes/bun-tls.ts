// Which configured CA certificates Bun's fetch must be handed per request, and which it trusts already. Bun reads
// a request's `tls.ca` on every fetch, and a `ca` replaces its roots, so handing it the roots and a whole bundle
// costs a parse of them all per request (docs/performance.md "Current figures", on Bun's fetch and `SSL_CERT_FILE`).

const CERTIFICATE = /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]*)-----END CERTIFICATE-----/g;

/** A PEM certificate's identity: its base64 body without whitespace (the DER's bytes, spelt one way). */
function identity(body: string): string {
  return body.replace(/\s+/g, '');
}

/**
 * The identities of the certificates in `pem`, or undefined when it holds a block other than a plain
 * `CERTIFICATE` (a `TRUSTED CERTIFICATE`, say), which is then not compared but handed on whole.
 */
export function certificateIds(pem: string): string[] | undefined {
  const ids = [...pem.matchAll(CERTIFICATE)].map((m) => identity(m[1]!));
  const blocks = pem.split('-----BEGIN ').length - 1;
  return ids.length === blocks ? ids : undefined;
}

/**
 * Of the configured PEM texts, what lies beyond `own` (the roots Bun verifies with when a fetch has no `ca`):
 * the texts (or single certificates) to hand to fetch, or an empty list when Bun trusts every one already.
 * Only certificates found byte for byte in `own` are left out, so the trust a fetch gets is the same either way.
 */
export function caBeyond(own: ReadonlySet<string>, configured: readonly string[]): string[] {
  const out: string[] = [];
  for (const pem of configured) {
    const ids = certificateIds(pem);
    if (!ids) {
      out.push(pem);
      continue;
    }
    for (const id of ids) if (!own.has(id)) out.push(asPem(id));
  }
  return out;
}

/** The identities of `pems` (PEM texts, as Bun's `tls.getCACertificates` lists them). */
export function ownIds(pems: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const pem of pems) for (const id of certificateIds(pem) ?? []) out.add(id);
  return out;
}

function asPem(id: string): string {
  return `-----BEGIN CERTIFICATE-----\n${id.match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----`;
}
