// The resources-file pipeline (docs/configuration.md, docs/aisix-compatibility.md "Command line"), staged like AISIX's, with its wording:
//
//   YAML → file-level checks (`_format_version` must be the string "1", known collections only)
//   → pass 1, per entry: `${VAR}` interpolation, identity present, duplicate identity (the duplicate is
//     dropped from every later check)
//   → pass 2, per entry: no `id`; kinds Sluice does not implement; desugar (`provider_key` by name,
//     `key_env`); then the canonical strict schema (an entry that fails desugar is not schema-checked)
//   → pass 3: cross references over the identities declared in pass 1 (an entry whose own schema failed
//     still counts as defined), duplicate `key_hash`
//   → snapshot.
// Every error of the file is collected into one report (`resources file <path>: N error(s):`, scopes
// `(file)` or `<kind>[<i>] ("<identity>")`); nothing is half-applied.
import { sha256Hex, uuidV5 } from '../util/crypto.ts';
import { FileReport, parseYaml } from '../util/report.ts';
import { type ParsedDocument, parseDocument } from './documents.ts';
import {
  type ApiKey,
  type CachePolicy,
  FILE_COLLECTIONS,
  isGatingKind,
  isNotServedKind,
  type Model,
  type ProviderKey,
  type ResourceKind,
} from './schema.ts';
import { type ResourceSet, Snapshot } from './snapshot.ts';

export type Env = Record<string, string | undefined>;

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
  | { ok: false; report: FileReport };

const FILE_SCOPE = '(file)';
const FORMAT_VERSION = '1';

/** Replace `${VAR}` in every string scalar; `$$` is a literal `$`. Unset or empty variables are errors. */
export function interpolate(
  value: unknown,
  env: Env,
  onError: (path: (string | number)[], msg: string) => void,
  path: (string | number)[] = [],
): unknown {
  if (typeof value === 'string') {
    if (!value.includes('$')) return value;
    return value.replace(/\$\$|\$\{([^}]*)\}/g, (m, name: string | undefined) => {
      if (m === '$$') return '$';
      if (!name || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        onError(path, `invalid variable reference "${m}"`);
        return '';
      }
      const v = env[name];
      if (v === undefined || v === '') {
        onError(path, `environment variable ${name} is ${v === undefined ? 'not set' : 'empty'}`);
        return '';
      }
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, env, onError, [...path, i]));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = interpolate(v, env, onError, [...path, k]);
    return out;
  }
  return value;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `models[2] ("gpt-4o")`: AISIX's entry scope (the identity quoted like a Rust `{:?}` string). */
export function rowScope(kind: string, index: number, row: unknown): string {
  const identity = identityOf(kind, row);
  return identity === undefined ? `${kind}[${index}]` : `${kind}[${index}] (${JSON.stringify(identity)})`;
}

/** The field naming an entry of `kind` (AISIX's `IdentityField`). */
function identityField(kind: string): string {
  if (kind === 'provider_keys' || kind === 'models' || kind === 'api_keys') return 'display_name';
  if (kind === 'mcp_servers' || kind === 'a2a_agents' || kind === 'passthrough_routes') {
    return 'name (or display_name)';
  }
  return 'name';
}

function identityOf(kind: string, row: unknown): string | undefined {
  if (!isRecord(row)) return undefined;
  if (kind === 'mcp_auth_settings') return 'mcp_auth_settings'; // a singleton: a second entry is a duplicate
  const field = (k: string) => (typeof row[k] === 'string' && row[k] !== '' ? row[k] as string : undefined);
  const f = identityField(kind);
  if (f === 'display_name') return field('display_name');
  if (f === 'name') return field('name');
  return field('name') ?? field('display_name');
}

/** `a.b[2].c` */
function dotted(path: readonly (string | number)[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${p}` : p;
  return out;
}

/** Run the whole pipeline over the bytes of a resources file. `file` is used in messages only. */
export async function loadResourcesFile(file: string, text: string, env: Env): Promise<LoadResult> {
  const report = new FileReport('resources file', file);
  const scratch = new FileReport('resources file', file);
  const src = parseYaml(text, scratch);
  if (!src) {
    for (const e of scratch.entries) {
      report.add(FILE_SCOPE, `YAML parse error: ${e.message}${e.line ? ` at line ${e.line}` : ''}`);
    }
    return { ok: false, report };
  }
  const built = await buildResourceSet(src.value, env, report);
  if (!built || !report.ok) return { ok: false, report };
  const snapshot = new Snapshot(built.set);
  let notServedCount = 0;
  for (const n of Object.values(built.notServed)) notServedCount += n;
  const collections: Record<string, number> = {};
  for (const kind of FILE_COLLECTIONS) {
    const entries = (src.value as Record<string, unknown>)[kind]; // a mapping: buildResourceSet checked it
    if (Array.isArray(entries)) collections[kind] = entries.length;
  }
  return {
    ok: true,
    snapshot,
    resourceCount: snapshot.size + notServedCount,
    notServed: built.notServed,
    collections,
  };
}

interface Prepared {
  kind: string;
  index: number;
  scope: string;
  identity: string;
  doc: Record<string, unknown>;
}

async function buildResourceSet(
  value: unknown,
  env: Env,
  report: FileReport,
): Promise<{ set: ResourceSet; notServed: Record<string, number> } | undefined> {
  if (value === null || value === undefined) {
    report.add(FILE_SCOPE, `missing mandatory _format_version (expected "${FORMAT_VERSION}")`);
    return undefined;
  }
  if (!isRecord(value)) {
    report.add(FILE_SCOPE, 'top level must be a mapping with `_format_version` and resource collections');
    return undefined;
  }
  const doc = value;

  // ── File level ──────────────────────────────────────────────────────────────
  const fv = doc._format_version;
  if (fv === undefined) report.add(FILE_SCOPE, `missing mandatory _format_version (expected "${FORMAT_VERSION}")`);
  else if (typeof fv !== 'string') {
    report.add(FILE_SCOPE, `_format_version must be the string "${FORMAT_VERSION}" (quote it)`);
  } else if (fv !== FORMAT_VERSION) {
    report.add(FILE_SCOPE, `unrecognized _format_version ${JSON.stringify(fv)} (supported: "${FORMAT_VERSION}")`);
  }
  for (const key of Object.keys(doc)) {
    if (key !== '_format_version' && !(FILE_COLLECTIONS as readonly string[]).includes(key)) {
      report.add(
        FILE_SCOPE,
        `unknown top-level key \`${key}\` (expected _format_version and resource collections: ${
          FILE_COLLECTIONS.join(', ')
        })`,
      );
    }
  }

  // ── Pass 1: interpolation, identity, duplicates ─────────────────────────────
  const prepared: Prepared[] = [];
  const identities = new Map<string, Map<string, number>>();
  for (const kind of FILE_COLLECTIONS) {
    const entries = doc[kind];
    if (entries === undefined || entries === null) continue;
    if (!Array.isArray(entries)) {
      report.add(FILE_SCOPE, `\`${kind}\` must be a sequence of maps`);
      continue;
    }
    const seen = new Map<string, number>();
    identities.set(kind, seen);
    for (let i = 0; i < entries.length; i++) {
      const item: unknown = entries[i];
      const indexScope = `${kind}[${i}]`;
      if (!isRecord(item)) {
        report.add(indexScope, 'entry must be a mapping');
        continue;
      }
      let firstError: string | undefined;
      const entry = interpolate(item, env, (path, msg) => {
        firstError ??= `field \`${dotted(path)}\`: ${msg}`;
      }) as Record<string, unknown>;
      if (firstError !== undefined) {
        report.add(indexScope, firstError);
        continue;
      }
      const identity = identityOf(kind, entry);
      if (identity === undefined) {
        report.add(
          indexScope,
          `${identityField(kind)} is required and must be a non-empty string (it is the entry's identity)`,
        );
        continue;
      }
      const scope = `${kind}[${i}] (${JSON.stringify(identity)})`;
      const first = seen.get(identity);
      if (first !== undefined) {
        report.add(
          scope,
          `duplicate ${kind} entry: ${identityField(kind)} ${
            JSON.stringify(identity)
          } is already defined at ${kind}[${first}] — identities must be unique within a kind`,
        );
        continue;
      }
      seen.set(identity, i);
      prepared.push({ kind, index: i, scope, identity, doc: entry });
    }
  }
  const derived = async (kind: string, identity: string) => uuidV5(`${kind}/${identity}`);
  const providerKeyIds = new Map<string, string>();
  for (const name of identities.get('provider_keys')?.keys() ?? []) {
    providerKeyIds.set(name, await derived('provider_keys', name));
  }

  // ── Pass 2: id, unsupported kinds, desugar, strict schema ───────────────────
  const typed = {
    provider_keys: [] as { scope: string; r: ProviderKey }[],
    models: [] as { scope: string; r: Model }[],
    api_keys: [] as { scope: string; r: ApiKey }[],
    cache_policies: [] as CachePolicy[],
  };
  const notServed: Record<string, number> = {};
  for (const e of prepared) {
    if (isGatingKind(e.kind)) {
      report.add(
        e.scope,
        `Sluice does not implement ${e.kind}: an entry of this kind would gate traffic, so the file is refused rather than served without it`,
      );
      continue;
    }
    if ('id' in e.doc) {
      report.add(
        e.scope,
        "the resources file does not accept `id` — ids are derived deterministically from the entry's name",
      );
      continue;
    }
    if (isNotServedKind(e.kind)) {
      notServed[e.kind] = (notServed[e.kind] ?? 0) + 1;
      continue;
    }
    const kind = e.kind as ResourceKind;
    const sugar = kind === 'models'
      ? desugarModel(e.doc, providerKeyIds)
      : kind === 'api_keys'
      ? await desugarApiKey(e.doc, env)
      : undefined;
    if (sugar !== undefined) {
      report.add(e.scope, sugar);
      continue;
    }
    const parsed: ParsedDocument = parseDocument(kind, await derived(kind, e.identity), e.doc, 'strict');
    if (!parsed.ok) {
      report.add(
        e.scope,
        parsed.errorKind === 'parse_failed' ? `cannot decode canonical document: ${parsed.error}` : parsed.error,
      );
      continue;
    }
    if (parsed.kind === 'provider_keys') typed.provider_keys.push({ scope: e.scope, r: parsed.resource });
    else if (parsed.kind === 'models') typed.models.push({ scope: e.scope, r: parsed.resource });
    else if (parsed.kind === 'api_keys') typed.api_keys.push({ scope: e.scope, r: parsed.resource });
    else typed.cache_policies.push(parsed.resource);
  }

  // ── Pass 3: cross references over the pass-1 identities ────────────────────
  const modelNames = [...(identities.get('models')?.keys() ?? [])];
  const modelSet = new Set(modelNames);
  const definedModels = modelNames.length === 0 ? 'none' : [...modelNames].sort().join(', ');
  const checkModelRef = (scope: string, field: string, ref: string) => {
    if (ref.includes('*') || modelSet.has(ref)) return;
    report.add(scope, `${field} references unknown model ${JSON.stringify(ref)} (defined models: ${definedModels})`);
  };
  for (const { scope, r } of typed.api_keys) {
    for (const m of r.allowed_models) checkModelRef(scope, 'allowed_models entry', m);
  }
  for (const { scope, r } of typed.models) {
    if (r.kind === 'routing') { for (const t of r.routing.targets) checkModelRef(scope, 'routing target', t.model); }
  }
  const seenHashes = new Map<string, string>();
  for (const { scope, r } of typed.api_keys) {
    const first = seenHashes.get(r.key_hash);
    if (first !== undefined) {
      report.add(
        scope,
        `duplicate api key credential: this entry's key resolves to the same key_hash as ${first} — every api key must have a distinct plaintext`,
      );
    } else seenHashes.set(r.key_hash, scope);
  }
  const pkIds = new Set(providerKeyIds.values());
  for (const { scope, r } of typed.models) {
    if (r.kind === 'direct' && !pkIds.has(r.provider_key_id)) {
      report.add(
        scope,
        `provider_key_id ${
          JSON.stringify(r.provider_key_id)
        } does not match any provider key defined in this file — reference it by name with \`provider_key\` instead`,
      );
    }
  }
  if (!report.ok) return undefined;
  return {
    set: {
      provider_keys: typed.provider_keys.map((x) => x.r),
      models: typed.models.map((x) => x.r),
      api_keys: typed.api_keys.map((x) => x.r),
      cache_policies: typed.cache_policies,
    },
    notServed,
  };
}

/** `models[].provider_key` (a provider key's name) → `provider_key_id`. Returns the error, if any. */
function desugarModel(doc: Record<string, unknown>, providerKeyIds: ReadonlyMap<string, string>): string | undefined {
  if (!('provider_key' in doc)) return undefined;
  const name = doc.provider_key;
  if (typeof name !== 'string') return '`provider_key` must be a string (a provider key display_name)';
  if ('provider_key_id' in doc) {
    return '`provider_key` (a name reference) and `provider_key_id` are mutually exclusive — set exactly one';
  }
  const id = providerKeyIds.get(name);
  if (id === undefined) {
    const names = [...providerKeyIds.keys()].sort();
    const known = names.length === 0
      ? 'no provider_keys are defined in this file'
      : `defined provider_keys: ${names.join(', ')}`;
    return `\`provider_key\` references unknown provider key ${JSON.stringify(name)} (${known})`;
  }
  delete doc.provider_key;
  doc.provider_key_id = id;
  return undefined;
}

/** `api_keys[].key_env` (the name of a variable holding the plaintext key) → `key_hash`; exactly one of them. */
async function desugarApiKey(doc: Record<string, unknown>, env: Env): Promise<string | undefined> {
  const hasEnv = 'key_env' in doc;
  const hasHash = 'key_hash' in doc;
  if (hasEnv && hasHash) return '`key_env` and `key_hash` are mutually exclusive — set exactly one';
  if (!hasEnv && !hasHash) {
    return 'one of `key_env` (environment variable holding the plaintext key) or `key_hash` (SHA-256 hex of the plaintext) is required';
  }
  if (!hasEnv) return undefined;
  const name = doc.key_env;
  if (typeof name !== 'string' || name === '') {
    return '`key_env` must be a non-empty string (an environment variable name)';
  }
  const plaintext = env[name];
  if (plaintext === undefined || plaintext === '') {
    return `\`key_env\` environment variable \`${name}\` is unset or empty`;
  }
  delete doc.key_env;
  doc.key_hash = await sha256Hex(plaintext);
  return undefined;
}
