// How the resources-file pipeline names an entry and collects what is wrong with it (docs/configuration.md
// "resources.yaml"): AISIX's scopes (`(file)`, `<kind>[<i>] ("<identity>")`) in one report, and the same
// problems as values, so the file source lists rejected rows without reading the report back.
import type { FileReport } from '../util/report.ts';

export const FILE_SCOPE = '(file)';

/** An entry of a collection by where it is in the file; `identity` once pass 1 has found it. */
export interface EntryRef {
  kind: string;
  index: number;
  identity?: string;
}

/** One problem of one entry, in report order. */
export interface EntryError extends EntryRef {
  message: string;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The field naming an entry of `kind` (AISIX's `IdentityField`). */
export function identityField(kind: string): string {
  if (kind === 'provider_keys' || kind === 'models' || kind === 'api_keys') return 'display_name';
  if (kind === 'mcp_servers' || kind === 'a2a_agents' || kind === 'passthrough_routes') {
    return 'name (or display_name)';
  }
  return 'name';
}

export function identityOf(kind: string, row: unknown): string | undefined {
  if (!isRecord(row)) return undefined;
  if (kind === 'mcp_auth_settings') return 'mcp_auth_settings'; // a singleton: a second entry is a duplicate
  const field = (k: string) => (typeof row[k] === 'string' && row[k] !== '' ? row[k] as string : undefined);
  const f = identityField(kind);
  if (f === 'display_name') return field('display_name');
  if (f === 'name') return field('name');
  return field('name') ?? field('display_name');
}

/** `models[2] ("gpt-4o")`: AISIX's entry scope (the identity quoted like a Rust `{:?}` string). */
export function scopeOf(e: EntryRef): string {
  return e.identity === undefined ? `${e.kind}[${e.index}]` : `${e.kind}[${e.index}] (${JSON.stringify(e.identity)})`;
}

export function rowScope(kind: string, index: number, row: unknown): string {
  return scopeOf({ kind, index, identity: identityOf(kind, row) });
}

/** Every problem of one file: the report an operator reads, and the entries' problems as values. */
export class Problems {
  readonly entries: EntryError[] = [];
  constructor(readonly report: FileReport) {}

  get ok(): boolean {
    return this.report.ok;
  }

  file(message: string): void {
    this.report.add(FILE_SCOPE, message);
  }

  entry(ref: EntryRef, message: string): void {
    this.report.add(scopeOf(ref), message);
    this.entries.push({ ...ref, message });
  }
}
