// etcd rows, one key at a time (SPEC §5.2), and the rule that decides which of them serve.
//
// A key is `<prefix>/<kind>/<id>` and its value one JSON document in canonical form. `parseRow` judges a
// key and its value alone (key shape, JSON, zod schema); it is run once per observed value, never again
// for a value that did not change. `decideServing` then decides, over every key, which value serves,
// using only cheap lookups (no parsing), so a watch event on a 20,000-row prefix re-parses one row; and
// `updateServing` re-judges only the keys a batch touched when they keep their name and kind (the
// common case: a value changed in place, or a bad value pinned).
//
// What serves (the rules `/status/config` reports):
// - a row whose value fails on its own (`bad_key`, `non_json`, `schema_failed`, `unknown_kind`) does not
//   serve; it is listed in `rejected[]`;
// - unknown top-level fields are dropped and the row loads (reported in `partially_compatible[]`);
//   unknown fields inside nested blocks (cooldown, routing …) are a schema failure, as in a file;
// - cross-references must resolve against what serves: a direct model's `provider_key_id`, a routing
//   model's target names (direct models only) and an api key's `allowed_models` entries without `*`.
//   A dangling reference rejects the row (`schema_failed`, message naming the reference). Rows are
//   re-judged after every batch, so the order of puts does not matter: a model written before its
//   provider key loads as soon as the key arrives;
// - display names are unique per kind (and `key_hash` among api keys). The row serving under a name
//   keeps it; otherwise the first in key order wins (direct models before routing ones). The loser is
//   rejected (`schema_failed`, "duplicate display_name … (also <key>)");
// - last-known-good: when a key that serves gets a value that is rejected for any reason, the value it
//   served keeps serving (`serving_stale_since`) until the key loads cleanly again or is deleted. The
//   same holds when an unchanged serving row loses a reference (its provider key or target deleted): it
//   keeps serving, pinned and listed, rather than disappearing because of a change to another key. A
//   pin never breaks display-name uniqueness. A valid value that turns a direct model into a routing
//   one (or back) repurposes the key and has no last-known-good fallback.
import {
  type ApiKey,
  ApiKeySchema,
  DEFAULT_API_BASE,
  defaultAdapter,
  type Model,
  ModelSchema,
  type ProviderKey,
  ProviderKeySchema,
  RESOURCE_KINDS,
  type ResourceKind,
  SHAPES,
} from '../../resources/schema.ts';
import type { ResourceSet } from '../../resources/snapshot.ts';
import { canonicalJson } from '../../util/crypto.ts';

export type RejectKind = 'bad_key' | 'non_json' | 'schema_failed' | 'unknown_kind';

/** A row that passed its own checks. `resource` is normalised exactly like the file pipeline does. */
export type ValidRow =
  | { ok: true; kind: 'provider_keys'; id: string; resource: ProviderKey; unknownFields: string[] }
  | { ok: true; kind: 'models'; id: string; resource: Model; unknownFields: string[] }
  | { ok: true; kind: 'api_keys'; id: string; resource: ApiKey; unknownFields: string[] };

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

/** One observed value of one key. Objects are reused while the value does not change (identity = same value). */
export interface RowValue {
  key: string;
  /** The value as etcd holds it (UTF-8 decoded). */
  raw: string;
  /** `key \0 canonical-json(value) \n` (the raw text for a non-JSON value), UTF-8: SPEC §8 hash input. */
  line: Uint8Array;
  parsed: ParsedRow;
  /** `JSON.stringify(raw)`, memoised for the snapshot cache. */
  json?: string;
}

export type ServedValue = RowValue & { parsed: ValidRow };

const encoder = new TextEncoder();

/** `/aisix/` → `/aisix`: the prefix without trailing slashes; keys live under `prefix + '/'`. */
export function normalizePrefix(prefix: string): string {
  return prefix.replace(/\/+$/, '');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Splits `<prefix>/<kind>/<id>`; anything else is `bad_key`, an unknown kind `unknown_kind`. */
export function splitKey(prefix: string, key: string): { ok: true; kind: ResourceKind; id: string } | RejectedValue {
  const root = `${prefix}/`;
  const rest = key.startsWith(root) ? key.slice(root.length) : key;
  const parts = rest.split('/');
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
    return {
      ok: false,
      kind: parts.length > 1 ? parts[0]! : '',
      id: rest,
      errorKind: 'bad_key',
      error: `key "${key}" is not of the form ${root}<kind>/<id>`,
    };
  }
  const [kind, id] = parts as [string, string];
  if (!(RESOURCE_KINDS as readonly string[]).includes(kind)) {
    return {
      ok: false,
      kind,
      id,
      errorKind: 'unknown_kind',
      error: `unknown resource kind "${kind}" (expected one of: ${RESOURCE_KINDS.join(', ')})`,
    };
  }
  return { ok: true, kind: kind as ResourceKind, id };
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

function zodMessage(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  return issues.map((i) => {
    const path = i.path.filter((p): p is string | number => typeof p !== 'symbol')
      .map((p, n) => (typeof p === 'number' ? `[${p}]` : n === 0 ? p : `.${p}`)).join('');
    return path ? `${path}: ${i.message}` : i.message;
  }).join('; ');
}

/** Judges one key and its value alone. Pure and synchronous; never puts a secret in a message. */
export function parseRow(prefix: string, key: string, raw: string, opts: { invalidUtf8?: boolean } = {}): ParsedRow {
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
  let value: unknown;
  try {
    value = JSON.parse(raw);
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
  if (!isRecord(value)) {
    return reject(
      'schema_failed',
      `value must be a JSON object, not ${
        Array.isArray(value) ? 'an array' : value === null ? 'null' : `a ${typeof value}`
      }`,
    );
  }
  const secrets = secretsOf(value);
  const shape: Record<string, unknown> = SHAPES[k.kind];
  const unknownFields = Object.keys(value).filter((f) => !(f in shape)).sort();
  if (value.id !== undefined && value.id !== k.id) {
    return reject(
      'schema_failed',
      scrub(`id: ${JSON.stringify(value.id)} does not match the key's id "${k.id}"`, secrets),
    );
  }
  switch (k.kind) {
    case 'provider_keys': {
      const r = ProviderKeySchema.safeParse(value);
      if (!r.success) return reject('schema_failed', scrub(zodMessage(r.error.issues), secrets));
      const adapter = r.data.adapter ?? defaultAdapter(r.data.provider);
      const api_base = (r.data.api_base ?? DEFAULT_API_BASE[adapter])?.replace(/\/+$/, '');
      return {
        ok: true,
        kind: 'provider_keys',
        id: k.id,
        resource: { ...r.data, adapter, api_base, id: k.id },
        unknownFields,
      };
    }
    case 'models': {
      const r = ModelSchema.safeParse(value);
      if (!r.success) return reject('schema_failed', scrub(zodMessage(r.error.issues), secrets));
      const resource =
        (r.data.routing
          ? { ...r.data, id: k.id, kind: 'routing', routing: r.data.routing }
          : { ...r.data, id: k.id, kind: 'direct' }) as Model;
      return { ok: true, kind: 'models', id: k.id, resource, unknownFields };
    }
    case 'api_keys': {
      const r = ApiKeySchema.safeParse(value);
      if (!r.success) return reject('schema_failed', scrub(zodMessage(r.error.issues), secrets));
      return { ok: true, kind: 'api_keys', id: k.id, resource: { ...r.data, id: k.id }, unknownFields };
    }
  }
}

/** The SPEC §8 hash line of one entry: `key \0 canonical-json(value) \n`, the raw text when not JSON. */
export function hashLine(key: string, raw: string): Uint8Array {
  let canonical: string;
  try {
    canonical = canonicalJson(JSON.parse(raw));
  } catch {
    canonical = raw;
  }
  return encoder.encode(`${key}\0${canonical}\n`);
}

export function rowValue(prefix: string, key: string, raw: string, opts: { invalidUtf8?: boolean } = {}): RowValue {
  return { key, raw, line: hashLine(key, raw), parsed: parseRow(prefix, key, raw, opts) };
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

/** sha256 (hex) over the concatenated lines, in the order given. */
export async function hashLines(lines: Iterable<Uint8Array>): Promise<string> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for (const l of lines) {
    parts.push(l);
    total += l.length;
  }
  const buf = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    buf.set(p, at);
    at += p.length;
  }
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', buf));
  let hex = '';
  for (let i = 0; i < digest.length; i++) hex += digest[i]!.toString(16).padStart(2, '0');
  return hex;
}

// ---------------------------------------------------------------------------------------------------
// Deciding what serves

export interface Problem {
  kind: string;
  id: string;
  errorKind: RejectKind;
  error: string;
  /** A previous value of this key keeps serving (last-known-good). */
  pinned: boolean;
}

export interface ServingDecision {
  /** key → the value it serves (the latest, or the pinned last-known-good). */
  served: Map<string, ServedValue>;
  /** key → why its latest value does not serve. */
  problems: Map<string, Problem>;
  /** What `served` claims (names, ids, hashes); `updateServing` continues from it. */
  claims: Claims;
  /** Set by `updateServing`: the only keys whose served value may differ from the decision it updated. */
  changedKeys?: ReadonlySet<string>;
}

type CheckFailure = { kind: 'dup' | 'ref'; message: string };

/** What serves so far in one decision: the names claimed and the ids references resolve against. */
export class Claims {
  private readonly names = {
    provider_keys: new Map<string, string>(),
    models: new Map<string, string>(),
    api_keys: new Map<string, string>(),
  };
  private readonly keyHashes = new Map<string, string>();
  private readonly providerKeyIds = new Set<string>();
  private readonly modelKinds = new Map<string, 'direct' | 'routing'>();

  private readonly reserved = {
    provider_keys: new Map<string, string>(),
    models: new Map<string, string>(),
    api_keys: new Map<string, string>(),
  };

  /** Keeps `name` for `key` (a row that keeps serving under it) before anything is judged. */
  reserve(key: string, row: ValidRow): void {
    this.reserved[row.kind].set(row.resource.display_name, key);
  }

  /**
   * Why `row` cannot serve under `key` now, if it cannot. A row failing both ways is a `dup` (it must not
   * serve, even pinned) reported with its reference message: references are judged against earlier
   * phases only, so that message does not depend on the order rows were judged in.
   */
  check(key: string, row: ValidRow): CheckFailure | undefined {
    const name = row.resource.display_name;
    const holder = this.names[row.kind].get(name) ?? this.reserved[row.kind].get(name);
    let dup = holder !== undefined && holder !== key ? `duplicate display_name "${name}" (also ${holder})` : undefined;
    const missing: string[] = [];
    switch (row.kind) {
      case 'provider_keys':
        break;
      case 'models': {
        const m = row.resource;
        if (m.kind === 'direct') {
          if (!this.providerKeyIds.has(m.provider_key_id)) {
            missing.push(`provider_key_id: no provider key with id "${m.provider_key_id}" is being served`);
          }
        } else {
          m.routing.targets.forEach((t, i) => {
            if (this.modelKinds.get(t.model) !== 'direct') {
              missing.push(`routing.targets[${i}].model: no direct model named "${t.model}" is being served`);
            }
          });
        }
        break;
      }
      case 'api_keys': {
        const other = this.keyHashes.get(row.resource.key_hash);
        if (!dup && other !== undefined && other !== key) {
          dup = `key_hash: another api key (${other}) has the same key_hash`;
        }
        row.resource.allowed_models.forEach((n, i) => {
          if (!n.includes('*') && !this.modelKinds.has(n)) {
            missing.push(`allowed_models[${i}]: no model named "${n}" is being served`);
          }
        });
        break;
      }
    }
    const ref = missing.length > 0 ? missing.join('; ') : undefined;
    if (dup) return { kind: 'dup', message: ref ?? dup };
    return ref ? { kind: 'ref', message: ref } : undefined;
  }

  claim(key: string, row: ValidRow): void {
    this.names[row.kind].set(row.resource.display_name, key);
    if (row.kind === 'provider_keys') this.providerKeyIds.add(row.id);
    else if (row.kind === 'models') this.modelKinds.set(row.resource.display_name, row.resource.kind);
    else this.keyHashes.set(row.resource.key_hash, key);
  }

  unclaim(key: string, row: ValidRow): void {
    const name = row.resource.display_name;
    if (this.names[row.kind].get(name) !== key) return;
    this.names[row.kind].delete(name);
    if (row.kind === 'provider_keys') this.providerKeyIds.delete(row.id);
    else if (row.kind === 'models') this.modelKinds.delete(name);
    else if (this.keyHashes.get(row.resource.key_hash) === key) this.keyHashes.delete(row.resource.key_hash);
  }
}

/**
 * What other rows can depend on in a served row: its kind, name, model kind and key hash. While no key
 * changes this, no other row's decision can change (the premise of `updateServing`).
 */
function interfaceOf(v: ServedValue | undefined): string | undefined {
  if (!v) return undefined;
  const r = v.parsed;
  const detail = r.kind === 'models' ? r.resource.kind : r.kind === 'api_keys' ? r.resource.key_hash : '';
  return `${r.kind}\0${r.resource.display_name}\0${detail}`;
}

/**
 * Phase in which a key is judged (references point from later phases to earlier ones): provider keys,
 * direct models, routing models, api keys, rows with nothing to serve.
 */
function phaseOf(first: ValidRow | undefined): number {
  if (!first) return 4;
  if (first.kind === 'provider_keys') return 0;
  if (first.kind === 'models') return first.resource.kind === 'direct' ? 1 : 2;
  return 3;
}

/**
 * The last-known-good value a key may fall back to. A valid new value that turns a direct model into a
 * routing one (or back) repurposes the key: it is judged as what it now is, with no fallback, so that a
 * decision never depends on the order in which rows of different phases were judged.
 */
function fallbackOf(now: RowValue, prev: ServedValue | undefined): ServedValue | undefined {
  if (!prev || !now.parsed.ok || now.parsed.kind !== 'models' || prev.parsed.kind !== 'models') return prev;
  return now.parsed.resource.kind === prev.parsed.resource.kind ? prev : undefined;
}

/**
 * Decides one key: its latest value if it passes against what serves so far, else its previous value
 * (last-known-good) unless that would break name uniqueness, else nothing.
 */
function judge(
  key: string,
  now: RowValue,
  prev: ServedValue | undefined,
  claims: Claims,
  served: Map<string, ServedValue>,
  problems: Map<string, Problem>,
): void {
  const serve = (v: ServedValue): void => {
    claims.claim(key, v.parsed);
    served.set(key, v);
  };
  let reason: { errorKind: RejectKind; error: string };
  let prevCheck: CheckFailure | undefined | 'unchecked' = 'unchecked';
  if (now.parsed.ok) {
    const failure = claims.check(key, now.parsed);
    if (!failure) return serve(now as ServedValue);
    reason = { errorKind: 'schema_failed', error: failure.message };
    if (prev === now) prevCheck = failure;
  } else {
    reason = { errorKind: now.parsed.errorKind, error: now.parsed.error };
  }
  const p = { kind: now.parsed.kind, id: now.parsed.id, ...reason };
  if (prev) {
    const f = prevCheck === 'unchecked' ? claims.check(key, prev.parsed) : prevCheck;
    if (!f || f.kind === 'ref') {
      serve(prev);
      problems.set(key, { ...p, pinned: true });
      return;
    }
  }
  problems.set(key, { ...p, pinned: false });
}

/**
 * Decides which value every key serves. `keys` (in key order) lists every key to judge, `latest` gives
 * each one's latest value, `previous` what served before (the last-known-good values). Cost: a few map
 * lookups per row; no row is parsed.
 *
 * Order: provider keys, direct models, routing models, api keys (references point backwards); within
 * each, rows that keep serving under the same name, rows that served under another, new rows, each in
 * key order. Names of rows that keep serving are reserved first, so a new row never takes one. The
 * result is a fixpoint: deciding again over what it serves, with nothing new observed, changes nothing
 * (which is what lets `updateServing` skip the rows a batch did not touch).
 */
export function decideServing(
  keys: readonly string[],
  latest: (key: string) => RowValue | undefined,
  previous: ReadonlyMap<string, ServedValue>,
): ServingDecision {
  const buckets: string[][] = Array.from({ length: 15 }, () => []);
  const claims = new Claims();
  for (const key of keys) {
    const now = latest(key);
    if (!now) continue;
    const prev = fallbackOf(now, previous.get(key));
    const first = now.parsed.ok ? now as ServedValue : prev;
    const group = !prev ? 2 : interfaceOf(first) === interfaceOf(prev) ? 0 : 1;
    // A row that keeps serving under its name keeps that name, whatever is judged before it.
    if (group === 0) claims.reserve(key, prev!.parsed); // non-null: group 0 has a previous value
    buckets[phaseOf(first?.parsed) * 3 + group]!.push(key);
  }
  const served = new Map<string, ServedValue>();
  const problems = new Map<string, Problem>();
  for (const bucket of buckets) {
    for (const key of bucket) {
      const now = latest(key)!; // non-null: bucketed keys have a value
      judge(key, now, fallbackOf(now, previous.get(key)), claims, served, problems);
    }
  }
  return { served, problems, claims };
}

/**
 * The incremental form of `decideServing` after a batch that changed only `touched` keys: re-judges
 * those keys alone against what the other rows claim. Returns undefined when a touched key's latest
 * value, or its outcome, changes what other rows can depend on (appears, disappears, renamed, changes
 * kind or key hash): then only a full `decideServing` is right. The common batches (a changed value
 * under the same name, a rejected value pinned) take this path. Consumes `current.claims` either way.
 */
export function updateServing(
  current: ServingDecision,
  touched: Iterable<string>,
  latest: (key: string) => RowValue | undefined,
): ServingDecision | undefined {
  const { claims } = current;
  const served = new Map(current.served);
  const problems = new Map(current.problems);
  const changedKeys = new Set<string>();
  for (const key of touched) {
    const before = current.served.get(key);
    const now = latest(key);
    // Only a key that keeps its interface by its own latest value (a full decision reserves its name).
    if (interfaceOf(now?.parsed.ok ? (now as ServedValue) : before) !== interfaceOf(before)) return undefined;
    if (before) claims.unclaim(key, before.parsed);
    served.delete(key);
    problems.delete(key);
    if (now) judge(key, now, fallbackOf(now, before), claims, served, problems);
    const after = served.get(key);
    if (interfaceOf(after) !== interfaceOf(before)) return undefined;
    if (after !== before) changedKeys.add(key);
  }
  return { served, problems, claims, changedKeys };
}

/** The served rows as the resource lists a Snapshot is built from, in key order. */
export function resourceSet(keys: readonly string[], served: ReadonlyMap<string, ServedValue>): ResourceSet {
  const set: ResourceSet = { provider_keys: [], models: [], api_keys: [] };
  for (const key of keys) {
    const v = served.get(key);
    if (!v) continue;
    const row = v.parsed;
    if (row.kind === 'provider_keys') set.provider_keys.push(row.resource);
    else if (row.kind === 'models') set.models.push(row.resource);
    else set.api_keys.push(row.resource);
  }
  return set;
}

/** `partially_compatible[]`: per kind and unknown field, how many serving rows carry it. */
export function partialCompatibility(
  served: Iterable<ServedValue>,
): { resource_kind: string; field: string; count: number }[] {
  const counts = new Map<string, { resource_kind: string; field: string; count: number }>();
  for (const v of served) {
    for (const field of v.parsed.unknownFields) {
      const id = `${v.parsed.kind}\0${field}`;
      const c = counts.get(id);
      if (c) c.count++;
      else counts.set(id, { resource_kind: v.parsed.kind, field, count: 1 });
    }
  }
  return [...counts.values()].sort((
    a,
    b,
  ) => (a.resource_kind === b.resource_kind
    ? (a.field < b.field ? -1 : 1)
    : a.resource_kind < b.resource_kind
    ? -1
    : 1)
  );
}
