// Which values of an exported entry are secrets, and the `${AISIXSECRET_…}` placeholder each becomes
// (docs/etcd.md "Export"; AISIX's `export/secrets.rs`): the names are AISIX's, so one file and one set of
// variables serve both gateways.

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** One live credential replaced by a placeholder; reported on stderr, never written into the file. */
export interface SecretPlaceholder {
  envVar: string;
  kind: string;
  /** The entry's file identity (display_name / name). */
  identity: string;
  /** What the value was, for the operator: `api_key`, `header x-team`, … */
  field: string;
}

/** Upper-cased, every byte that is not an ASCII letter or digit → `_` (no collapsing: stable, greppable). */
export function sanitize(label: string): string {
  return label.replace(/[^A-Za-z0-9]/g, '_').toUpperCase();
}

/** `AISIXSECRET_<KIND>_<IDENTITY>_<FIELD>`: never starts `AISIX_`, which config.yaml overrides own. */
export function secretVar(kindToken: string, identity: string, field: string): string {
  return `AISIXSECRET_${kindToken}_${sanitize(identity)}_${sanitize(field)}`;
}

const GUARDRAIL_SECRET_KEYS = ['api_key', 'access_key_secret', 'secret_access_key'];

function isObject(v: Json | undefined): v is { [k: string]: Json } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

class Redactor {
  constructor(
    private readonly kindToken: string,
    private readonly kind: string,
    private readonly identity: string,
    private readonly out: SecretPlaceholder[],
  ) {}

  private placeholder(field: string, label: string): string {
    const envVar = secretVar(this.kindToken, this.identity, field);
    this.out.push({ envVar, kind: this.kind, identity: this.identity, field: label });
    return `\${${envVar}}`;
  }

  topLevel(doc: { [k: string]: Json }, field: string): void {
    if (typeof doc[field] === 'string' && doc[field] !== '') doc[field] = this.placeholder(field, field);
  }

  /** Every non-empty string value of the object `doc[field]`; other values stay (`safe_prompt: true`). */
  stringMap(doc: { [k: string]: Json }, field: string, fieldKey: string, label: string): void {
    const map = doc[field];
    if (!isObject(map)) return;
    for (const [name, v] of Object.entries(map)) {
      if (typeof v === 'string' && v !== '') {
        map[name] = this.placeholder(`${fieldKey}_${sanitize(name)}`, `${label} ${name}`);
      }
    }
  }

  /** Every non-empty string under one of `keys`, at any depth. */
  byKey(v: Json, keys: readonly string[]): void {
    if (Array.isArray(v)) {
      for (const x of v) this.byKey(x, keys);
      return;
    }
    if (!isObject(v)) return;
    for (const [k, x] of Object.entries(v)) {
      if (keys.includes(k) && typeof x === 'string' && x !== '') v[k] = this.placeholder(k, k);
      else this.byKey(x, keys);
    }
  }
}

/**
 * Replaces, in place, the secrets of one entry of `kind` (the five secret-bearing kinds; others have none)
 * and records each placeholder in `out`.
 */
export function redactSecrets(
  kind: string,
  identity: string,
  doc: { [k: string]: Json },
  out: SecretPlaceholder[],
): void {
  if (kind === 'provider_keys') {
    const r = new Redactor('PROVIDER_KEY', kind, identity, out);
    r.topLevel(doc, 'api_key');
    const request = doc.request;
    if (isObject(request)) {
      r.stringMap(request, 'default_headers', 'DEFAULT_HEADERS', 'default header');
      r.stringMap(request, 'default_body_fields', 'DEFAULT_BODY_FIELDS', 'default body field');
    }
  } else if (kind === 'guardrails') {
    new Redactor('GUARDRAIL', kind, identity, out).byKey(doc, GUARDRAIL_SECRET_KEYS);
  } else if (kind === 'mcp_servers') {
    new Redactor('MCP_SERVER', kind, identity, out).topLevel(doc, 'secret');
  } else if (kind === 'a2a_agents') {
    new Redactor('A2A_AGENT', kind, identity, out).topLevel(doc, 'secret');
  } else if (kind === 'oidc_providers') {
    new Redactor('OIDC_PROVIDER', kind, identity, out).topLevel(doc, 'hmac_secret');
  } else if (kind === 'observability_exporters') {
    new Redactor('OBSERVABILITY_EXPORTER', kind, identity, out).stringMap(doc, 'headers', 'HEADER', 'header');
  }
}

/** Placeholders two entries share (their names fold to one variable): one value cannot serve both. */
export function placeholderCollisions(placeholders: readonly SecretPlaceholder[]): string[] {
  const owner = new Map<string, string>();
  const out: string[] = [];
  for (const p of placeholders) {
    const o = owner.get(p.envVar);
    if (o === undefined) owner.set(p.envVar, p.identity);
    else if (o !== p.identity) {
      out.push(
        `secret placeholder \${${p.envVar}} is derived for both ${JSON.stringify(o)} and ${
          JSON.stringify(p.identity)
        }; their names collapse to the same environment variable, so one real credential cannot be supplied to each — rename one entry to disambiguate`,
      );
    }
  }
  return out;
}
