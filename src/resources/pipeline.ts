// The resources-file pipeline (docs/configuration.md "resources.yaml", docs/aisix-compatibility.md
// "Command line"), staged like AISIX's and with its wording; each stage is a function below or a module
// of its own:
//
//   YAML → file level (`_format_version` is the string "1", known collections only)
//   → interpolate, per entry: `${VAR}`, identity present, duplicate identity (dropped from every later stage)
//   → validate, per entry: no `id`; kinds Sluice does not implement; desugar; the canonical strict schema
//   → cross references over the identities interpolate declared; duplicate `key_hash`
//   → snapshot.
// Every error of the file is collected into one report; nothing is half-applied.
import type { ApiKeyIndex } from './api-key-index.ts';
import type { FileIds, NameIds } from './policy-document.ts';
import { isSamePlainApiKey } from './plain-api-key.ts';
import { uuidV5 } from '../util/crypto.ts';
import { parsePlainYaml } from '../util/plain-yaml.ts';
import { ChunkedList } from '../util/chunked-list.ts';
import { type KeyedMap, keyedMap } from '../util/sharded-map.ts';
import { FileReport, parseYaml } from '../util/report.ts';
import { type AcceptedRow, type EntryError, type EntryRef, identityField, identityOf, Problems } from './entries.ts';
import { dotted, type Env, interpolate } from './interpolate.ts';
import {
  FILE_COLLECTIONS,
  isGatingKind,
  isResourceKind,
  KINDS,
  parseDocument,
  RESOURCE_KINDS,
  type ResourceKind,
  type ResourceOf,
} from './kinds.ts';
import { BULK_SLICE_MS, Pacer, SLICE_MS } from './pace.ts';
import { checkReferences } from './references.ts';
import { checkIdentityReferences } from './identity-references.ts';
import { type ResourceSet, Snapshot } from './snapshot.ts';
import { type Assembled, assembleYaml, type YamlPieces } from './yaml-pieces.ts';

export { type Env, interpolate } from './interpolate.ts';
export { type EntryError, rowScope } from './entries.ts';

export type LoadResult =
  | {
    ok: true;
    snapshot: Snapshot;
    /** Entries accepted: the served ones plus those of kinds Sluice accepts and does not serve. */
    resourceCount: number;
    /** Accepted entries of kinds Sluice does not serve (docs/aisix-compatibility.md "Never fail open"), per kind. */
    notServed: Record<string, number>;
    /** The collections the file writes as a sequence (`models: []` included), with their entry counts. */
    collections: Record<string, number>;
  }
  | {
    ok: false;
    report: FileReport;
    /** The report's entry problems as values, in report order (file-level ones are only in the report). */
    entryErrors: EntryError[];
  };

const FORMAT_VERSION = '1';

/** Below this many bytes a file is parsed on the event loop: starting a worker would take longer than the parse. */
export const OFF_THREAD_MIN_BYTES = 256 * 1024;

/**
 * From this many bytes the usual YAML subset is read on the event loop (in slices) even where a worker could
 * parse it: `yaml`'s syntax tree then costs hundreds of MB. Below it, from `OFF_THREAD_MIN_BYTES`, the worker
 * keeps the event loop free for the requests a reload serves meanwhile.
 */
export const ON_LOOP_MIN_BYTES = 8 * 1024 * 1024;

export interface LoadOptions {
  /** Parse on another thread (`Platform.parseYamlOffThread`) when the file is large; absent: on this one. */
  parseOffThread?: (text: string) => YamlPieces;
  /** Told once per load, as soon as the YAML stage has ended, where it ran. */
  onParsed?: (where: ParsedOn) => void;
  /** A snapshot serves requests while this load runs (a reload): short slices keep their latency. */
  serving?: boolean;
  /**
   * The serving snapshot's api keys (a reload): a plain key row that did not change keeps its resource, so the
   * new snapshot allocates only for the rows that changed and the old one is not garbage all at once.
   */
  previousKeys?: ApiKeyIndex;
}

/** Where the YAML stage of a load ran. */
export interface ParsedOn {
  on: 'worker thread' | 'event loop';
  /** Set when the file was large enough for the worker and the worker failed: why, before the fallback. */
  workerError?: string;
}

/**
 * Run the whole pipeline over the text of a resources file, whole or as pieces each ending just after a line
 * break (a large file's, never joined unless `yaml` must read it). Pieces are consumed: the array is emptied
 * once they are parsed, so a large file's text is not held while its snapshot is built. `file` is used in
 * messages only.
 */
export async function loadResourcesFile(
  file: string,
  text: string | string[],
  env: Env,
  opts: LoadOptions = {},
): Promise<LoadResult> {
  const problems = new Problems(new FileReport('resources file', file));
  // A reload's requests wait up to a slice: the short ones; a first load serves none yet.
  const pacer = new Pacer(opts.serving ? SLICE_MS : BULK_SLICE_MS);
  const built = await parseAndCheck(text, env, opts, problems, pacer);
  if (!built || !problems.ok) return { ok: false, report: problems.report, entryErrors: problems.entries };
  const snapshot = await Snapshot.build(built.set, () => pacer.pace());
  return snapshotOf(snapshot, built);
}

/**
 * The YAML stage and every check: what to index and the file's collections, or undefined with the problems
 * reported. The parsed document stays in here, so it is garbage before the indexes are built (at a million
 * api keys, a million rows that would otherwise live beside the snapshot being built).
 */
async function parseAndCheck(
  text: string | string[],
  env: Env,
  opts: LoadOptions,
  problems: Problems,
  pacer: Pacer,
): Promise<(Built & { collections: Record<string, number> }) | undefined> {
  const parsed = await parseText(text, opts, pacer);
  opts.onParsed?.(parsed.on);
  if (!parsed.ok) {
    for (const e of parsed.errors) {
      problems.file(`YAML parse error: ${e.message}${e.line ? ` at line ${e.line}` : ''}`);
    }
    return undefined;
  }
  await pacer.yield();
  // Counted before the pipeline consumes the collections (a mapping, or buildResourceSet refuses it).
  const collections = isRecord(parsed.value) ? collectionsOf(parsed.value) : {};
  const built = await buildResourceSet(parsed.value, env, problems, pacer, opts.previousKeys);
  return built && { ...built, collections };
}

/**
 * The YAML stage: a file a worker should parse (`ON_LOOP_MIN_BYTES`) goes to it; otherwise the fast path for the
 * usual subset here, in slices; outside it (or on any error) `yaml`, off the event loop when the platform can and
 * the file is large, else here.
 */
async function parseText(
  pieces: string | string[],
  opts: LoadOptions,
  pacer: Pacer,
): Promise<Assembled & { on: ParsedOn }> {
  const size = typeof pieces === 'string' ? pieces.length : pieces.reduce((n, p) => n + p.length, 0);
  const toWorker = opts.parseOffThread !== undefined && size >= OFF_THREAD_MIN_BYTES && size < ON_LOOP_MIN_BYTES;
  const plain = toWorker ? undefined : await parsePlainYaml(pieces, () => pacer.pace());
  if (plain !== undefined) {
    if (typeof pieces !== 'string') pieces.length = 0;
    return { ok: true, value: plain, on: { on: 'event loop' } };
  }
  const text = typeof pieces === 'string' ? pieces : pieces.join('');
  if (typeof pieces !== 'string') pieces.length = 0;
  let workerError: string | undefined;
  if (opts.parseOffThread && text.length >= OFF_THREAD_MIN_BYTES) {
    try {
      const assembled = await assembleYaml(opts.parseOffThread(text), () => pacer.yield());
      return { ...assembled, on: { on: 'worker thread' } };
    } catch (e) {
      // A worker that cannot start or dies: the same parse, on this thread.
      workerError = e instanceof Error ? e.message : String(e);
    }
  }
  const on: ParsedOn = { on: 'event loop', ...(workerError !== undefined ? { workerError } : {}) };
  const scratch = new FileReport('resources file', '');
  const src = parseYaml(text, scratch);
  if (src) return { ok: true, value: src.value, on };
  return { ok: false, errors: scratch.entries.map((e) => ({ message: e.message, line: e.line })), on };
}

interface Built {
  set: ResourceSet;
  notServed: Record<string, number>;
}

/** The last stage: the served snapshot, and what the file source compares across reloads. */
function snapshotOf(snapshot: Snapshot, built: Built & { collections: Record<string, number> }): LoadResult {
  let notServedCount = 0;
  for (const n of Object.values(built.notServed)) notServedCount += n;
  return {
    ok: true,
    snapshot,
    resourceCount: snapshot.size + notServedCount,
    notServed: built.notServed,
    collections: built.collections,
  };
}

/** The collections the file writes as a sequence (`models: []` included), with their entry counts. */
function collectionsOf(doc: Record<string, unknown>): Record<string, number> {
  const collections: Record<string, number> = {};
  for (const kind of FILE_COLLECTIONS) {
    const entries = doc[kind];
    if (Array.isArray(entries)) collections[kind] = entries.length;
  }
  return collections;
}

async function buildResourceSet(
  value: unknown,
  env: Env,
  problems: Problems,
  pacer: Pacer,
  previousKeys: ApiKeyIndex | undefined,
): Promise<Built | undefined> {
  const doc = checkFileLevel(value, problems);
  if (!doc) return undefined;
  // The rows stay in the document's collections: interpolation replaces or drops each in place, and validation
  // takes each out as it reads it, so a row lives as one object until its resource is made.
  const identities = await interpolateEntries(doc, env, problems, pacer);
  const providerKeyIds = new Map<string, string>();
  for (const name of identities.get('provider_keys')?.keys() ?? []) {
    await pacer.pace();
    providerKeyIds.set(name, uuidV5(`provider_keys/${name}`));
  }
  const { accepted, notServed } = await validateEntries(
    doc,
    identities,
    { env, providerKeyIds, previousKeys },
    problems,
    pacer,
  );
  await pacer.pace();
  const modelNames = [...(identities.get('models')?.keys() ?? [])];
  const typed = {
    provider_keys: accepted.provider_keys ?? [],
    models: accepted.models ?? [],
    api_keys: accepted.api_keys ?? [],
  };
  const routeNames = [...(identities.get('passthrough_routes')?.keys() ?? [])];
  await checkReferences(typed, modelNames, new Set(providerKeyIds.values()), problems, () => pacer.pace(), routeNames);
  checkIdentityReferences({
    api_keys: await jwtBound(typed.api_keys, pacer),
    oidc_providers: accepted.oidc_providers ?? [],
    claim_mappings: accepted.claim_mappings ?? [],
  }, problems);
  if (!problems.ok) return undefined;
  const set: ResourceSet = {
    provider_keys: typed.provider_keys.map((x) => x.r),
    models: typed.models.map((x) => x.r),
    api_keys: await resourcesOf(typed.api_keys, pacer),
  };
  for (const kind of RESOURCE_KINDS) {
    const list = accepted[kind];
    if (list !== undefined && set[kind] === undefined) (set as Record<string, unknown>)[kind] = list.map((x) => x.r);
  }
  return { set, notServed };
}

/**
 * The api keys that name a `jwt_subject`: the only ones the identity checks read, found in slices (a file of a
 * million keys has few or none, and a pass over all of them at once held the loop for tens of milliseconds).
 */
async function jwtBound<T extends { r: { jwt_subject?: unknown } }>(keys: readonly T[], pacer: Pacer): Promise<T[]> {
  const bound: T[] = [];
  for (const k of keys) {
    const p = pacer.pace();
    if (p) await p;
    if (k.r.jwt_subject !== undefined) bound.push(k);
  }
  return bound;
}

/** The accepted rows' resources, in order, in slices. */
async function resourcesOf<R>(rows: readonly { r: R }[], pacer: Pacer): Promise<R[]> {
  const out: R[] = [];
  for (const row of rows) {
    const p = pacer.pace();
    if (p) await p;
    out.push(row.r);
  }
  return out;
}

/**
 * Each entry name of `kind` → the id derived from it, made when asked: a Map of them held a million ids beside the
 * rows, each made again by the row that owns it.
 */
class IdsByName implements NameIds {
  /** Every id, made on the first `hasId` and kept: each row that names an id directly asks. */
  private ids: Set<string> | undefined;

  constructor(private readonly kind: string, private readonly names: ReadonlyMap<string, number> | undefined) {}

  get size(): number {
    return this.names?.size ?? 0;
  }

  get(name: string): string | undefined {
    return this.names?.has(name) ? uuidV5(`${this.kind}/${name}`) : undefined;
  }

  has(name: string): boolean {
    return this.names?.has(name) ?? false;
  }

  *keys(): MapIterator<string> {
    if (this.names) yield* this.names.keys();
  }

  hasId(id: string): boolean {
    this.ids ??= new Set(this.values());
    return this.ids.has(id);
  }

  *values(): MapIterator<string> {
    for (const name of this.keys()) yield uuidV5(`${this.kind}/${name}`);
  }

  *entries(): MapIterator<[string, string]> {
    for (const name of this.keys()) yield [name, uuidV5(`${this.kind}/${name}`)];
  }

  [Symbol.iterator](): MapIterator<[string, string]> {
    return this.entries();
  }

  forEach(fn: (value: string, key: string, map: ReadonlyMap<string, string>) => void, thisArg?: unknown): void {
    for (const [k, v] of this.entries()) fn.call(thisArg, v, k, this);
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The top level: a mapping, the format version, known collections only. Undefined: nothing more to check. */
function checkFileLevel(value: unknown, problems: Problems): Record<string, unknown> | undefined {
  if (value === null || value === undefined) {
    problems.file(`missing mandatory _format_version (expected "${FORMAT_VERSION}")`);
    return undefined;
  }
  if (!isRecord(value)) {
    problems.file('top level must be a mapping with `_format_version` and resource collections');
    return undefined;
  }
  const fv = value._format_version;
  if (fv === undefined) problems.file(`missing mandatory _format_version (expected "${FORMAT_VERSION}")`);
  else if (typeof fv !== 'string') {
    problems.file(`_format_version must be the string "${FORMAT_VERSION}" (quote it)`);
  } else if (fv !== FORMAT_VERSION) {
    problems.file(`unrecognized _format_version ${JSON.stringify(fv)} (supported: "${FORMAT_VERSION}")`);
  }
  for (const key of Object.keys(value)) {
    if (key !== '_format_version' && !(FILE_COLLECTIONS as readonly string[]).includes(key)) {
      problems.file(
        `unknown top-level key \`${key}\` (expected _format_version and resource collections: ${
          FILE_COLLECTIONS.join(', ')
        })`,
      );
    }
  }
  return value;
}

/** Whether any string in `v` holds a `$`: the rows that do not (most, in a large file) skip interpolation's walk. */
function holdsDollar(v: unknown): boolean {
  if (typeof v === 'string') return v.includes('$');
  if (Array.isArray(v)) return v.some(holdsDollar);
  if (v !== null && typeof v === 'object') {
    for (const k in v) if (holdsDollar((v as Record<string, unknown>)[k])) return true;
  }
  return false;
}

/**
 * Per entry: `${VAR}`, identity present, duplicate identity; each entry is replaced in its collection by what
 * interpolation made of it, or by `undefined` when refused. `identities`: kind → identity → index.
 */
async function interpolateEntries(
  doc: Record<string, unknown>,
  env: Env,
  problems: Problems,
  pacer: Pacer,
): Promise<Map<string, KeyedMap<number>>> {
  const identities = new Map<string, KeyedMap<number>>();
  const lists = new Set<unknown[]>();
  for (const kind of FILE_COLLECTIONS) {
    const value = doc[kind];
    if (value === undefined || value === null) continue;
    if (!Array.isArray(value)) {
      problems.file(`\`${kind}\` must be a sequence of maps`);
      continue;
    }
    let entries: unknown[] = value;
    // One list under two collections (a YAML alias): each is changed in place, so the second gets a copy.
    if (lists.has(entries)) doc[kind] = entries = entries.slice();
    lists.add(entries);
    // Identity → index, each index naming its identity through `names` (the entries are consumed later).
    const names = new ChunkedList<string>();
    const seen = keyedMap<number>((index) => names.at(index)!);
    identities.set(kind, seen);
    for (let index = 0; index < entries.length; index++) {
      const p = pacer.pace();
      if (p) await p;
      entries[index] = interpolateEntry({ kind, index }, entries[index], env, seen, names, problems);
    }
  }
  return identities;
}

function interpolateEntry(
  at: EntryRef,
  item: unknown,
  env: Env,
  seen: KeyedMap<number>,
  names: ChunkedList<string>,
  problems: Problems,
): Record<string, unknown> | undefined {
  if (!isRecord(item)) {
    problems.entry(at, 'entry must be a mapping');
    return undefined;
  }
  let firstError: string | undefined;
  const entry = !holdsDollar(item) ? item : interpolate(item, env, (path, msg) => {
    firstError ??= `field \`${dotted(path)}\`: ${msg}`;
  }) as Record<string, unknown>;
  if (firstError !== undefined) {
    problems.entry(at, firstError);
    return undefined;
  }
  const { kind, index } = at;
  const identity = identityOf(kind, entry);
  if (identity === undefined) {
    problems.entry(
      at,
      `${identityField(kind)} is required and must be a non-empty string (it is the entry's identity)`,
    );
    return undefined;
  }
  const first = seen.get(identity);
  if (first !== undefined) {
    problems.entry(
      { kind, index, identity },
      `duplicate ${kind} entry: ${identityField(kind)} ${
        JSON.stringify(identity)
      } is already defined at ${kind}[${first}] — identities must be unique within a kind`,
    );
    return undefined;
  }
  names.set(index, identity);
  seen.set(identity, index);
  return entry;
}

/** The entries of each served kind that passed their schema, with where they are. */
type Accepted = { [K in ResourceKind]?: AcceptedRow<ResourceOf<K>>[] };

/** What validation reads besides the entries. */
interface ValidateContext {
  env: Env;
  providerKeyIds: ReadonlyMap<string, string>;
  fileIds: FileIds;
  previousKeys: ApiKeyIndex | undefined;
}

/**
 * Per entry that passed interpolation: no `id`, kinds Sluice does not implement or serve, desugar, then the strict
 * schema. The collections are consumed: each entry is taken out once read, so the parsed rows become garbage a
 * slice at a time.
 */
async function validateEntries(
  doc: Record<string, unknown>,
  identities: Map<string, KeyedMap<number>>,
  base: Omit<ValidateContext, 'fileIds'>,
  problems: Problems,
  pacer: Pacer,
): Promise<{ accepted: Accepted; notServed: Record<string, number> }> {
  const fileIds: FileIds = {
    api_keys: new IdsByName('api_keys', identities.get('api_keys')),
    models: new IdsByName('models', identities.get('models')),
  };
  const context: ValidateContext = { ...base, fileIds };
  const out: Validated = { problems, accepted: {}, notServed: {} };
  for (const kind of FILE_COLLECTIONS) {
    const entries = doc[kind];
    if (!Array.isArray(entries)) continue;
    for (let index = 0; index < entries.length; index++) {
      const p = pacer.pace();
      if (p) await p;
      const entry = entries[index] as Record<string, unknown> | undefined;
      entries[index] = undefined;
      const waiting = entry === undefined ? undefined : validateEntry(kind, index, entry, context, out);
      if (waiting) await waiting;
    }
    entries.length = 0;
  }
  identities.delete('api_keys'); // a name per key, read only for the ids
  return { accepted: out.accepted, notServed: out.notServed };
}

/**
 * One entry that passed interpolation: into `accepted`, `notServed` or `problems`. A promise only when its desugar
 * must wait (a `key_env` to hash): the usual row of a large file allocates none.
 */
function validateEntry(
  kind: string,
  index: number,
  entry: Record<string, unknown>,
  context: ValidateContext,
  out: Validated,
): Promise<void> | undefined {
  const identity = identityOf(kind, entry)!;
  const refusal = refusedKind(kind, entry);
  if (refusal !== undefined) {
    out.problems.entry({ kind, index, identity }, refusal);
    return undefined;
  }
  if (!isResourceKind(kind)) {
    out.notServed[kind] = (out.notServed[kind] ?? 0) + 1;
    return undefined;
  }
  const sugar = KINDS[kind].desugar?.(entry, context);
  if (sugar instanceof Promise) {
    return sugar.then((s) => acceptEntry(kind, index, identity, entry, s, context, out));
  }
  acceptEntry(kind, index, identity, entry, sugar, context, out);
  return undefined;
}

/** What validation has found so far. */
interface Validated {
  problems: Problems;
  accepted: Accepted;
  notServed: Record<string, number>;
}

/** An entry after its desugar (`sugar`: why it refused): its schema, and where it goes. */
function acceptEntry(
  kind: ResourceKind,
  index: number,
  name: string,
  entry: Record<string, unknown>,
  sugar: string | undefined,
  context: ValidateContext,
  { problems, accepted, notServed }: Validated,
): void {
  let identity = name;
  if (sugar !== undefined) return problems.entry({ kind, index, identity }, sugar);
  // The id other rows refer to it by (`providerKeyIds`, `fileIds`) is this same UUIDv5 of its identity.
  const id = uuidV5(`${kind}/${identity}`);
  const { previousKeys } = context;
  const kept = kind === 'api_keys' ? previousKeys?.get(id) : undefined;
  if (kept !== undefined && isSamePlainApiKey(kept, entry)) {
    // The serving key's own name: the one just parsed is garbage with its row.
    (accepted.api_keys ??= []).push({ kind, index, identity: kept.display_name ?? identity, r: kept });
    return;
  }
  if (kind === 'api_keys' && typeof entry.display_name === 'string') {
    identity = entry.display_name = ownString(entry.display_name);
  }
  const parsed = parseDocument(kind, id, entry, 'strict');
  if (!parsed.ok) {
    return problems.entry(
      { kind, index, identity },
      parsed.errorKind === 'parse_failed' ? `cannot decode canonical document: ${parsed.error}` : parsed.error,
    );
  }
  if (parsed.resource === undefined) notServed[kind] = (notServed[kind] ?? 0) + 1;
  else ((accepted[kind] ??= []) as AcceptedRow<unknown>[]).push({ kind, index, identity, r: parsed.resource });
}

/**
 * `s` as a string of its own. JavaScriptCore (Bun) keeps the whole text alive behind a slice of any length, where V8
 * copies short ones: a key's name cut from a piece of a large file kept that piece for the snapshot's life, so a
 * million keys kept the file's text.
 */
const ownString = (s: string): string => JSON.parse(JSON.stringify(s)) as string;

/** Why an entry is refused before its schema: a kind that would gate traffic, or an `id` of its own. */
function refusedKind(kind: string, entry: Record<string, unknown>): string | undefined {
  if (isGatingKind(kind)) {
    return `Sluice does not implement ${kind}: an entry of this kind would gate traffic, so the file is refused rather than served without it`;
  }
  if ('id' in entry) {
    return "the resources file does not accept `id` — ids are derived deterministically from the entry's name";
  }
  return undefined;
}
