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
import type { FileIds } from './policy-document.ts';
import { isSamePlainApiKey } from './plain-api-key.ts';
import { uuidV5 } from '../util/crypto.ts';
import { parsePlainYaml } from '../util/plain-yaml.ts';
import { ShardedMap } from '../util/sharded-map.ts';
import { FileReport, parseYaml } from '../util/report.ts';
import { type EntryError, type EntryRef, identityField, identityOf, Problems } from './entries.ts';
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
  const { prepared, identities } = await interpolateEntries(doc, env, problems, pacer);
  // From here `prepared` holds the entries: validation drops each once read, and the rows die with it.
  for (const kind of FILE_COLLECTIONS) if (Array.isArray(doc[kind])) (doc[kind] as unknown[]).length = 0;
  const providerKeyIds = new Map<string, string>();
  for (const name of identities.get('provider_keys')?.keys() ?? []) {
    await pacer.pace();
    providerKeyIds.set(name, uuidV5(`provider_keys/${name}`));
  }
  const fileIds: FileIds = {
    api_keys: await idsOf(identities, 'api_keys', pacer),
    models: await idsOf(identities, 'models', pacer),
  };
  identities.delete('api_keys'); // a name per key, read only for the ids above
  const context = { env, providerKeyIds, fileIds, previousKeys };
  const { accepted, notServed } = await validateEntries(prepared, context, problems, pacer);
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

/** Each entry name of `kind` → the id derived from it. */
async function idsOf(
  identities: Map<string, ShardedMap<number>>,
  kind: string,
  pacer: Pacer,
): Promise<ShardedMap<string>> {
  const out = new ShardedMap<string>();
  for (const name of identities.get(kind)?.keys() ?? []) {
    await pacer.pace();
    out.set(name, uuidV5(`${kind}/${name}`));
  }
  return out;
}

/** The id already derived for a row other rows refer to (provider keys, models, api keys); the same UUIDv5. */
function knownId(
  kind: ResourceKind,
  identity: string,
  providerKeyIds: ReadonlyMap<string, string>,
  fileIds: FileIds,
): string | undefined {
  if (kind === 'provider_keys') return providerKeyIds.get(identity);
  return kind === 'models' || kind === 'api_keys' ? fileIds[kind].get(identity) : undefined;
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

/** An entry that passed interpolation, with its identity. */
interface Prepared {
  at: EntryRef & { identity: string };
  doc: Record<string, unknown>;
}

/** Per entry: `${VAR}`, identity present, duplicate identity. `identities`: kind → identity → index. */
async function interpolateEntries(
  doc: Record<string, unknown>,
  env: Env,
  problems: Problems,
  pacer: Pacer,
): Promise<{ prepared: Prepared[]; identities: Map<string, ShardedMap<number>> }> {
  const prepared: Prepared[] = [];
  const identities = new Map<string, ShardedMap<number>>();
  for (const kind of FILE_COLLECTIONS) {
    const entries = doc[kind];
    if (entries === undefined || entries === null) continue;
    if (!Array.isArray(entries)) {
      problems.file(`\`${kind}\` must be a sequence of maps`);
      continue;
    }
    const seen = new ShardedMap<number>();
    identities.set(kind, seen);
    for (let index = 0; index < entries.length; index++) {
      await pacer.pace();
      const p = interpolateEntry({ kind, index }, entries[index], env, seen, problems);
      if (p) prepared.push(p);
    }
  }
  return { prepared, identities };
}

function interpolateEntry(
  at: EntryRef,
  item: unknown,
  env: Env,
  seen: ShardedMap<number>,
  problems: Problems,
): Prepared | undefined {
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
  seen.set(identity, index);
  return { at: { kind, index, identity }, doc: entry };
}

/** The entries of each served kind that passed their schema, with where they are. */
type Accepted = { [K in ResourceKind]?: { at: EntryRef; r: ResourceOf<K> }[] };

/** What validation reads besides the entries. */
interface ValidateContext {
  env: Env;
  providerKeyIds: ReadonlyMap<string, string>;
  fileIds: FileIds;
  previousKeys: ApiKeyIndex | undefined;
}

/**
 * Per entry: no `id`, kinds Sluice does not implement or serve, desugar, then the strict schema. `prepared` is
 * consumed: each entry is dropped once read, so the parsed rows become garbage a slice at a time.
 */
async function validateEntries(
  prepared: (Prepared | undefined)[],
  context: ValidateContext,
  problems: Problems,
  pacer: Pacer,
): Promise<{ accepted: Accepted; notServed: Record<string, number> }> {
  const accepted: Accepted = {};
  const notServed: Record<string, number> = {};
  const { providerKeyIds, fileIds, previousKeys } = context;
  for (let i = 0; i < prepared.length; i++) {
    await pacer.pace();
    const e = prepared[i]!;
    prepared[i] = undefined;
    const refusal = refusedKind(e);
    if (refusal !== undefined) {
      problems.entry(e.at, refusal);
      continue;
    }
    const kind = e.at.kind;
    if (!isResourceKind(kind)) {
      notServed[kind] = (notServed[kind] ?? 0) + 1;
      continue;
    }
    const sugar = await KINDS[kind].desugar?.(e.doc, context);
    if (sugar !== undefined) {
      problems.entry(e.at, sugar);
      continue;
    }
    const id = knownId(kind, e.at.identity, providerKeyIds, fileIds) ?? uuidV5(`${kind}/${e.at.identity}`);
    const kept = kind === 'api_keys' ? previousKeys?.get(id) : undefined;
    if (kept !== undefined && isSamePlainApiKey(kept, e.doc)) {
      (accepted.api_keys ??= []).push({ at: e.at, r: kept });
      continue;
    }
    if (kind === 'api_keys' && typeof e.doc.display_name === 'string') {
      e.doc.display_name = ownString(e.doc.display_name);
    }
    const parsed = parseDocument(kind, id, e.doc, 'strict');
    if (!parsed.ok) {
      problems.entry(
        e.at,
        parsed.errorKind === 'parse_failed' ? `cannot decode canonical document: ${parsed.error}` : parsed.error,
      );
      continue;
    }
    if (parsed.resource === undefined) notServed[kind] = (notServed[kind] ?? 0) + 1;
    else ((accepted[kind] ??= []) as { at: EntryRef; r: unknown }[]).push({ at: e.at, r: parsed.resource });
  }
  return { accepted, notServed };
}

/**
 * `s` as a string of its own. JavaScriptCore (Bun) keeps the whole text alive behind a slice of any length, where V8
 * copies short ones: a key's name cut from a piece of a large file kept that piece for the snapshot's life, so a
 * million keys kept the file's text.
 */
const ownString = (s: string): string => JSON.parse(JSON.stringify(s)) as string;

/** Why an entry is refused before its schema: a kind that would gate traffic, or an `id` of its own. */
function refusedKind(e: Prepared): string | undefined {
  if (isGatingKind(e.at.kind)) {
    return `Sluice does not implement ${e.at.kind}: an entry of this kind would gate traffic, so the file is refused rather than served without it`;
  }
  if ('id' in e.doc) {
    return "the resources file does not accept `id` — ids are derived deterministically from the entry's name";
  }
  return undefined;
}
