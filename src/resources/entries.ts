// How the resources-file pipeline names an entry and collects what is wrong with it (docs/configuration.md
// "resources.yaml"): AISIX's scopes (`(file)`, `<kind>[<i>] ("<identity>")`) in one report, and the same
// problems as values, so the file source lists rejected rows without reading the report back.
import type { FileReport } from '../util/report.ts';
import { type Identity, isKind, KINDS } from './kinds.ts';

export const FILE_SCOPE = '(file)';

/** An entry of a collection by where it is in the file; `identity` once pass 1 has found it. */
export interface EntryRef {
  kind: string;
  index: number;
  identity?: string;
}

/**
 * An entry that passed its schema: where it is and its resource, one object (a file may hold a million rows, each
 * of them live until the snapshot is built).
 */
export interface AcceptedRow<R> extends EntryRef {
  r: R;
}

/** One problem of one entry, in report order. */
export interface EntryError extends EntryRef {
  message: string;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** How an entry of `kind` is named (its registry entry; `name` for a kind that is not one). */
function identityRule(kind: string): Identity {
  return isKind(kind) ? KINDS[kind].identity : 'name';
}

/** The field naming an entry of `kind` (AISIX's `IdentityField`), as messages spell it. */
export function identityField(kind: string): string {
  const rule = identityRule(kind);
  return rule === 'display_name' ? 'display_name' : rule === 'name_or_display_name' ? 'name (or display_name)' : 'name';
}

export function identityOf(kind: string, row: unknown): string | undefined {
  if (!isRecord(row)) return undefined;
  const rule = identityRule(kind);
  if (rule === 'singleton') return kind; // a second entry is a duplicate
  const field = (k: string) => (typeof row[k] === 'string' && row[k] !== '' ? row[k] as string : undefined);
  if (rule === 'display_name') return field('display_name');
  if (rule === 'name') return field('name');
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
    // The reference's own fields: `ref` may be a row carrying its resource.
    const e: EntryError = { kind: ref.kind, index: ref.index, message };
    if ('identity' in ref) e.identity = ref.identity;
    this.entries.push(e);
  }
}
