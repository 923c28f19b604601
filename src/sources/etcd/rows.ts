// etcd rows, one key at a time (docs/etcd.md, docs/aisix-compatibility.md "Resources"), and which of them serve.
//
// A key is `<prefix>/<kind>/<id>` (the id may contain `/`) and its value one JSON document. `parseRow`
// judges a key and its value alone, with AISIX's lenient read contract (documents.ts): unknown members are
// dropped at every depth and reported, types, required members, ranges and closed enums still apply. It is
// run once per observed value, never again for a value that did not change.
//
// What serves (the rules `/status/config` reports) — each row is judged alone, as AISIX's loader does:
// - a row whose value fails (`bad_key`, `non_json`, `schema_failed`, `parse_failed`, `unknown_kind`,
//   `unsupported`) does not serve; it is listed in `rejected[]`;
// - there are no cross-row checks: duplicate display names or key hashes all load (the name and key-hash
//   indexes keep the row written last), a model whose provider key is missing loads (and fails at
//   dispatch), an api key naming a model that does not exist loads;
// - AISIX kinds Sluice does not implement: those that gate traffic are rejected (`unsupported`, never
//   ignored: "Never fail open"); the others are accepted, not served, and reported as partially compatible
//   (field `*`);
// - last-known-good: when a key that serves gets a value that is rejected, the value it served keeps
//   serving (`serving_stale_since`) until the key loads cleanly again or is deleted — except an `api_keys`
//   row, which stops serving: a rejected value may be a revocation written wrong, and a key must not stay
//   alive on it (docs/etcd.md "Per-row validation").
import {
  AISIX_KINDS,
  isKind,
  isResourceKind,
  type KindName,
  KINDS,
  type NotServedKind,
  parseDocument,
  type ReadOf,
  type ResourceKind,
  roleOf,
} from '../../resources/kinds.ts';
import type { ResourceSet } from '../../resources/snapshot.ts';
import type { ApiKey } from '../../resources/schema.ts';
import { sha256 } from '@noble/hashes/sha2.js';
import { canonicalJson } from '../../util/crypto.ts';
import { isPlainApiKey, plainApiKeyText } from '../../resources/plain-api-key.ts';
import { paceSteps, runSteps } from '../../util/steps.ts';

export type RejectKind =
  | 'bad_key'
  | 'non_json'
  | 'schema_failed'
  | 'parse_failed'
  | 'unknown_kind'
  | 'unsupported';

/**
 * A row that passed its own checks. `resource` is normalised exactly like the file pipeline does; a trace
 * exporter's is undefined for an AISIX exporter kind Sluice does not serve (field `*`).
 */
export type ValidRow =
  | { [K in ResourceKind]: { ok: true; kind: K; id: string; resource: ReadOf<K>; unknownFields: string[] } }[
    ResourceKind
  ]
  /** An AISIX kind Sluice accepts and does not serve: reported as partially compatible, field `*`. */
  | { ok: true; kind: NotServedKind; id: string; resource?: undefined; unknownFields: ['*'] };

export interface RejectedValue {
  ok: false;
  /** The kind segment of the key (`''` when there is none). */
  kind: string;
  /** The id segment of the key, or the whole key relative to the prefix when it has no usable shape. */
  id: string;
  errorKind: RejectKind;
  /** Never contains a secret (provider api keys, key hashes). */
  error: string;
}

export type ParsedRow = ValidRow | RejectedValue;

/**
 * One observed value of one key. Objects are reused while the value does not change (identity = same value).
 * Every member is set by the constructor, so that no row needs a second store for the members set later.
 */
export class RowValue {
  /** etcd `mod_revision` of the value (0 when unknown: a cache restore). Orders the name indexes. */
  rev: number;
  /** The key's latest `mod_revision` (a put of the same value moves it; the admin lists' `revision`). */
  modRev: number | undefined = undefined;
  /** The last full range (its count) that held the key. */
  seen: number | undefined = undefined;
  /**
   * The text, or how a plain api key's text is made again from its resource (`true`: its document has a
   * `disabled` member): a prefix may hold millions of them, and the resource holds every member of the text.
   */
  private readonly own: string | boolean;
  /** The judgement; of a plain api key, only its resource (`parsed` wraps it when read). */
  private readonly judged: ParsedRow | ApiKey;

  constructor(
    readonly key: string,
    text: string | { plain: boolean },
    /** `text` is the value's canonical JSON. */
    readonly json: boolean,
    parsed: ParsedRow,
    rev: number,
  ) {
    this.own = typeof text === 'string' ? text : text.plain;
    this.judged = typeof text === 'string' ? parsed : (parsed as { resource: ApiKey }).resource;
    this.rev = rev;
  }

  /** The row's judgement (a plain api key's is made when read: one object less for each of millions). */
  get parsed(): ParsedRow {
    if (typeof this.own === 'string') return this.judged as ParsedRow;
    const resource = this.judged as ApiKey;
    return { ok: true, kind: 'api_keys', id: resource.id, resource, unknownFields: NO_FIELDS };
  }

  /** `parsed.ok`, read without making a plain api key's judgement (a load reads it of a million rows). */
  get ok(): boolean {
    return typeof this.own !== 'string' || (this.judged as ParsedRow).ok;
  }

  /** `parsed.kind`, likewise. */
  get kind(): string {
    return typeof this.own === 'string' ? (this.judged as ParsedRow).kind : 'api_keys';
  }

  /** `parsed.resource` of a valid row (undefined for any other), likewise. */
  get resource(): ValidRow['resource'] {
    if (typeof this.own !== 'string') return this.judged as ApiKey;
    const p = this.judged as ParsedRow;
    return p.ok ? p.resource : undefined;
  }

  /** `parsed.unknownFields` of a valid row (none for any other), likewise. */
  get unknownFields(): readonly string[] {
    if (typeof this.own !== 'string') return NO_FIELDS;
    const p = this.judged as ParsedRow;
    return p.ok ? p.unknownFields : NO_FIELDS;
  }

  /**
   * The value: its canonical JSON when it is JSON (docs/etcd.md hash input: `key \0 canonical-json(value) \n`),
   * else the text etcd holds (UTF-8 decoded). Only the canonical form is kept: a prefix may hold millions of rows,
   * and the JSON etcd holds means the same.
   */
  get text(): string {
    const own = this.own;
    if (typeof own === 'string') return own;
    return plainApiKeyText(this.judged as ApiKey, own);
  }
}

export type ServedValue = RowValue & { parsed: ValidRow };

const encoder = new TextEncoder();

/** The ignored fields of a plain api key row: none. */
const NO_FIELDS: string[] = [];

/** No JSON value was parsed (not JSON, or not looked at). */
const UNPARSED = Symbol('unparsed');

/** `/aisix/` → `/aisix`: the prefix without trailing slashes; keys live under `prefix + '/'`. */
export function normalizePrefix(prefix: string): string {
  return prefix.replace(/\/+$/, '');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Splits `<prefix>/<kind>/<id>` (everything after the kind is the id, `/` included); anything else is
 * `bad_key`, a kind that is not one of AISIX's 15 `unknown_kind`.
 */
export function splitKey(
  prefix: string,
  key: string,
): { ok: true; kind: KindName; id: string } | RejectedValue {
  const root = `${prefix}/`;
  const rest = key.startsWith(root) ? key.slice(root.length) : key;
  const slash = rest.indexOf('/');
  const kind = slash < 0 ? '' : rest.slice(0, slash);
  const id = slash < 0 ? '' : rest.slice(slash + 1);
  if (kind === '' || id === '') {
    return {
      ok: false,
      kind,
      id: rest,
      errorKind: 'bad_key',
      error: `key "${key}" is not of the form ${root}<kind>/<id>`,
    };
  }
  if (!isKind(kind)) {
    return {
      ok: false,
      kind,
      id,
      errorKind: 'unknown_kind',
      error: `unknown resource kind "${kind}" (AISIX kinds: ${AISIX_KINDS.join(', ')})`,
    };
  }
  return { ok: true, kind, id };
}

/** String values under secret-bearing fields, to scrub from messages (defence in depth: zod does not echo input). */
function secretsOf(obj: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const f of ['api_key', 'secret', 'key_hash', 'password', 'token']) {
    const v = obj[f];
    if (typeof v === 'string' && v.length >= 4) out.push(v);
  }
  return out;
}

function scrub(message: string, secrets: string[]): string {
  let out = message;
  for (const s of secrets) out = out.split(s).join('***');
  return out;
}

/** Judges one key and its value alone. Pure and synchronous; never puts a secret in a message. */
export function parseRow(prefix: string, key: string, raw: string, opts: { invalidUtf8?: boolean } = {}): ParsedRow {
  return judgeRow(prefix, key, raw, opts, UNPARSED);
}

/** `parseRow`, given the value already parsed from `raw` when it is JSON (`parsed` is consumed). */
function judgeRow(
  prefix: string,
  key: string,
  raw: string,
  opts: { invalidUtf8?: boolean },
  parsed: unknown,
): ParsedRow {
  const k = splitKey(prefix, key);
  if (!k.ok) return k;
  if (opts.invalidUtf8) {
    return {
      ok: false,
      kind: k.kind,
      id: k.id,
      errorKind: key.includes('\uFFFD') ? 'bad_key' : 'non_json',
      error: 'not valid UTF-8',
    };
  }
  const reject = (errorKind: RejectKind, error: string): RejectedValue => ({
    ok: false,
    kind: k.kind,
    id: k.id,
    errorKind,
    error,
  });
  let value: unknown = parsed;
  try {
    if (value === UNPARSED) value = JSON.parse(raw);
  } catch (e) {
    // The parser's message quotes the input, which may be a secret: keep only the position.
    const at = /position (\d+)/.exec((e as Error).message);
    return reject(
      'non_json',
      raw.trim() === ''
        ? 'value is empty, not a JSON document'
        : `value is not valid JSON${at ? ` (at position ${at[1]})` : ''}`,
    );
  }
  if (roleOf(k.kind) === 'gating') {
    return reject(
      'unsupported',
      `Sluice does not implement ${k.kind}: a row of this kind gates traffic, so it is refused rather than ignored`,
    );
  }
  if (!isRecord(value)) {
    return reject(
      'schema_failed',
      `value must be a JSON object, not ${
        Array.isArray(value) ? 'an array' : value === null ? 'null' : `a ${typeof value}`
      }`,
    );
  }
  // The gating kinds were refused above: what is not served here is accepted as a whole (`*`).
  if (!isResourceKind(k.kind)) return { ok: true, kind: k.kind as NotServedKind, id: k.id, unknownFields: ['*'] };
  const secrets = secretsOf(value);
  const r = parseDocument(k.kind, k.id, value, 'lenient');
  if (!r.ok) return reject(r.errorKind, scrub(r.error, secrets));
  return { ok: true, kind: k.kind, id: k.id, resource: r.resource, unknownFields: r.ignored } as ValidRow;
}

export function rowValue(
  prefix: string,
  key: string,
  raw: string,
  opts: { invalidUtf8?: boolean; rev?: number } = {},
): RowValue {
  // One JSON parse serves the canonical text and the row's judgement: the text is taken first, as reading the
  // row consumes the value.
  let value: unknown = UNPARSED;
  let canon: string | undefined;
  // A plain api key keeps no text: it is made again from its resource when read.
  let plain: { plain: boolean } | undefined;
  try {
    value = JSON.parse(raw);
    if (!isRecord(value) || !isPlainApiKey(value)) canon = canonicalJson(value);
    else if (!key.startsWith(`${prefix}/api_keys/`) || opts.invalidUtf8) canon = plainApiKeyText(value);
    else plain = { plain: value.disabled !== undefined };
  } catch {
    value = UNPARSED;
  }
  const parsed = judgeRow(prefix, key, raw, opts, value);
  if (plain !== undefined) {
    if (parsed.ok) return new RowValue(key, plain, true, parsed, opts.rev ?? 0);
    // Refused before its document was read (a key without an id), so the document is as parsed.
    canon = plainApiKeyText(value as Record<string, unknown>);
  }
  return new RowValue(key, canon ?? raw, canon !== undefined, parsed, opts.rev ?? 0);
}

/** Whether `raw`, as etcd holds it, is the value `v` holds (JSON: the same document, however it is written). */
export function sameValue(v: RowValue, raw: string): boolean {
  if (raw === v.text) return true;
  if (!v.json) return false;
  try {
    return canonicalJson(JSON.parse(raw)) === v.text;
  } catch {
    return false;
  }
}

/**
 * etcd's key order (bytes of UTF-8, i.e. code point order). Plain `<` compares UTF-16 code units, which
 * differs only when both keys have a character at or above U+D800 at the first difference.
 */
export function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      // Surrogates (astral code points) sort after U+E000–U+FFFF in code point order.
      x = x < 0xe000 ? x + 0x2000 : x - 0x800;
      y = y < 0xe000 ? y + 0x2000 : y - 0x800;
    }
    return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

/**
 * The docs/etcd.md hash lines (`key \0 text \n`) of `rows` (a bucket's, in etcd order; undefined: a key without
 * one), as UTF-8, and how many there were; undefined when there are none. One bucket's rows (row-hash.ts): small
 * enough to encode at once.
 */
export function rowLines(
  rows: readonly (RowValue | undefined)[],
): { bytes: Uint8Array<ArrayBuffer>; rows: number } | undefined {
  let text = '';
  let n = 0;
  for (const r of rows) {
    if (r === undefined) continue;
    text += `${r.key}\0${r.text}\n`;
    n++;
  }
  return n === 0 ? undefined : { bytes: encoder.encode(text), rows: n };
}

/**
 * SHA-256 (hex) over the hash lines of the rows of `keys` (those `rows` has), in that order, fed a piece at a time:
 * `config_hash` before it was taken by bucket (docs/etcd.md "The snapshot cache": an older cache still restores).
 */
export function hashRows(keys: Iterable<string>, rows: { get(key: string): RowValue | undefined }): string {
  const h = sha256.create();
  let text = '';
  for (const key of keys) {
    const r = rows.get(key);
    if (r === undefined) continue;
    text += `${r.key}\0${r.text}\n`;
    if (text.length < 65536) continue;
    h.update(encoder.encode(text));
    text = '';
  }
  const digest = h.update(encoder.encode(text)).digest();
  let hex = '';
  for (let i = 0; i < digest.length; i++) hex += digest[i]!.toString(16).padStart(2, '0');
  return hex;
}

// ---------------------------------------------------------------------------------------------------
// What serves

export interface Problem {
  kind: string;
  id: string;
  errorKind: RejectKind;
  error: string;
  /** A previous value of this key keeps serving (last-known-good). */
  pinned: boolean;
}

/**
 * One key's outcome: its latest value when that is valid; otherwise the value it served before keeps
 * serving (pinned) and the latest value is the problem — unless it is an api key, which fails closed.
 * `now` undefined: the key was deleted.
 */
function failsClosed(kind: string): boolean {
  return isResourceKind(kind) && KINDS[kind].failsClosed === true;
}

export function judgeKey(
  now: RowValue | undefined,
  prev: ServedValue | undefined,
): { served: ServedValue | undefined; problem: Problem | undefined } {
  if (!now) return { served: undefined, problem: undefined };
  if (now.ok) return { served: now as ServedValue, problem: undefined };
  const p = now.parsed as RejectedValue;
  const kept = failsClosed(p.kind) ? undefined : prev;
  return {
    served: kept,
    problem: { kind: p.kind, id: p.id, errorKind: p.errorKind, error: p.error, pinned: kept !== undefined },
  };
}

/**
 * The served rows as the resource lists a Snapshot is built from, in write order (`mod_revision`, then key
 * order): the Snapshot's name and key-hash indexes keep the last entry of a name, i.e. the row written last.
 */
export function resourceSet(keys: Iterable<string>, served: ReadonlyMap<string, ServedValue>): ResourceSet {
  return runSteps(resourceSetSteps(servedOf(keys, served)));
}

/** What each of `keys` serves, in their order. */
export function* servedOf(
  keys: Iterable<string>,
  served: ReadonlyMap<string, ServedValue>,
): Generator<ServedValue | undefined, undefined> {
  for (const key of keys) yield served.get(key);
}

/**
 * `resourceSet` in slices, of what each key serves in etcd order (`values`), `pace` awaited between rows: at a
 * million keys the one pass over them and its sort held the loop for most of a second (docs/performance.md
 * "Configuration at scale").
 */
export async function resourceSetPaced(
  values: Iterable<ServedValue | undefined>,
  pace: () => Promise<void> | undefined,
): Promise<ResourceSet> {
  return await paceSteps(resourceSetSteps(values), pace);
}

/** Rows the lists' work handles between two yields: a yield per row cost about as much as the row. */
const ROWS_PER_STEP = 16;

/** `resourceSet`'s work, yielding every `ROWS_PER_STEP` rows and every few entries of its sort. */
function* resourceSetSteps(values: Iterable<ServedValue | undefined>): Generator<void, ResourceSet> {
  let rows: ServedValue[] = [];
  let ordered = true;
  let top = 0;
  let n = 0;
  for (const v of values) {
    if (++n % ROWS_PER_STEP === 0) yield;
    if (!v || v.resource === undefined) continue;
    if (rows.length > 0 && rows[rows.length - 1]!.rev > v.rev) ordered = false;
    if (v.rev > top) top = v.rev;
    rows.push(v);
  }
  if (!ordered) rows = yield* byRevision(rows, top);
  const set: ResourceSet = { provider_keys: [], models: [], api_keys: [] };
  for (let i = 0; i < rows.length; i++) {
    const v = rows[i]!;
    ((set[v.kind as ResourceKind] ??= []) as unknown[]).push(v.resource);
    if (i % ROWS_PER_STEP === 0) yield;
  }
  return set;
}

/**
 * `rows` (revisions up to `top`) by revision, key order among equal ones: a numeric sort of `revision · 2^21 +
 * position` (a million rows sort in a fraction of what a comparator sort of the objects takes); a comparator sort
 * beyond its range.
 */
function* byRevision(rows: ServedValue[], top: number): Generator<void, ServedValue[]> {
  const span = 2 ** 21;
  if (rows.length >= span || top >= Number.MAX_SAFE_INTEGER / span) return rows.sort((a, b) => a.rev - b.rev);
  const order = new Float64Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    order[i] = rows[i]!.rev * span + i;
    if (i % ROWS_PER_STEP === 0) yield;
  }
  const sorted = yield* sortSteps(order);
  const out: ServedValue[] = new Array(rows.length);
  for (let i = 0; i < sorted.length; i++) {
    out[i] = rows[sorted[i]! % span]!;
    if (i % ROWS_PER_STEP === 0) yield;
  }
  return out;
}

/** Entries `sortSteps` sorts natively in one step, and merges between two yields. */
const SORT_RUN = 4096;

/**
 * `a` (distinct values) in ascending order, yielding every `SORT_RUN` entries: runs sorted natively, then merged
 * pass by pass (one native sort of a million entries held the loop some 150 ms). The result is `a` or a new array.
 */
export function* sortSteps(a: Float64Array): Generator<void, Float64Array> {
  const n = a.length;
  for (let i = 0; i < n; i += SORT_RUN) {
    a.subarray(i, Math.min(n, i + SORT_RUN)).sort();
    yield;
  }
  if (n <= SORT_RUN) return a;
  let src = a;
  let dst: Float64Array = new Float64Array(n);
  for (let width = SORT_RUN; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n);
      const hi = Math.min(lo + 2 * width, n);
      let i = lo;
      let j = mid;
      for (let k = lo; k < hi; k++) {
        dst[k] = j >= hi || (i < mid && src[i]! < src[j]!) ? src[i++]! : src[j++]!;
        if (k % SORT_RUN === 0) yield;
      }
    }
    [src, dst] = [dst, src];
  }
  return src;
}

export interface PartialCompatibility {
  /** `partially_compatible[]`: per kind and ignored field, how many serving rows carry it; sorted. */
  fields: { resource_kind: string; field: string; count: number }[];
  /** Per kind, how many serving rows have at least one ignored field (the gauge). */
  rows: Record<string, number>;
}

/**
 * `partially_compatible[]` kept as rows start and stop serving, so a change of one row costs the fields of
 * that row, not a pass over every serving row.
 */
export class PartialCounts {
  private readonly counts = new Map<string, { resource_kind: string; field: string; count: number }>();
  private readonly rows: Record<string, number> = {};

  add(v: ServedValue | undefined): void {
    this.count(v, 1);
  }

  remove(v: ServedValue | undefined): void {
    this.count(v, -1);
  }

  private count(v: ServedValue | undefined, by: 1 | -1): void {
    const fields = v?.unknownFields;
    if (!v || !fields || fields.length === 0) return;
    const kind = v.kind;
    const n = (this.rows[kind] ?? 0) + by;
    if (n > 0) this.rows[kind] = n;
    else delete this.rows[kind];
    for (const field of fields) {
      const id = `${kind}\0${field}`;
      const c = this.counts.get(id);
      if (c === undefined) this.counts.set(id, { resource_kind: kind, field, count: by });
      else if (c.count + by === 0) this.counts.delete(id);
      else c.count += by;
    }
  }

  /** The counts now, sorted by kind then field. */
  result(): PartialCompatibility {
    const fields = [...this.counts.values()].map((c) => ({ ...c })).sort((a, b) =>
      a.resource_kind === b.resource_kind
        ? (a.field < b.field ? -1 : a.field > b.field ? 1 : 0)
        : a.resource_kind < b.resource_kind
        ? -1
        : 1
    );
    return { fields, rows: { ...this.rows } };
  }
}
