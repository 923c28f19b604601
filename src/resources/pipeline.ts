// The resources-file pipeline (SPEC §4): YAML → `${VAR}` interpolation → desugar → zod → cross-references
// → snapshot. Every error of the file is collected into one report; nothing is half-applied.
import type { z } from 'zod';
import { sha256Hex, uuidV5 } from '../util/crypto.ts';
import { FileReport, formatPath, parseYaml, type YamlSource } from '../util/report.ts';
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
} from './schema.ts';
import { type ResourceSet, Snapshot } from './snapshot.ts';

export type Env = Record<string, string | undefined>;

export type LoadResult =
  | { ok: true; snapshot: Snapshot; resourceCount: number }
  | { ok: false; report: FileReport };

const TOP_LEVEL = new Set(['_format_version', ...RESOURCE_KINDS]);
/** File-only sugar accepted on top of the canonical shape, per kind. */
const SUGAR: Record<ResourceKind, readonly string[]> = {
  provider_keys: ['secret'],
  models: ['provider_key'],
  api_keys: ['key_env'],
};

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

/** `models[2] ("gpt-4o")` */
export function rowScope(kind: string, index: number, row: unknown): string {
  const name = isRecord(row) && typeof row.display_name === 'string' ? ` ("${row.display_name}")` : '';
  return `${kind}[${index}]${name}`;
}

/** An interpolation error inside a row gets the row's scope (`models[2] ("gpt-4o")`), like every other row error. */
function interpolationScope(src: YamlSource, path: (string | number)[], msg: string): [string, string] {
  const [kind, index, ...rest] = path;
  if (typeof kind === 'string' && (RESOURCE_KINDS as readonly string[]).includes(kind) && typeof index === 'number') {
    const rows = (src.value as Record<string, unknown>)[kind];
    const row = Array.isArray(rows) ? rows[index] : undefined;
    return [rowScope(kind, index, row), rest.length > 0 ? `${formatPath(rest)}: ${msg}` : msg];
  }
  return [formatPath(path) || 'file', msg];
}

/** Run the whole pipeline over the bytes of a resources file. `file` is used in messages only. */
export async function loadResourcesFile(file: string, text: string, env: Env): Promise<LoadResult> {
  const report = new FileReport('resources file', file);
  const src = parseYaml(text, report);
  if (!src) return { ok: false, report };
  const set = await buildResourceSet(src, env, report);
  if (!set || !report.ok) return { ok: false, report };
  const snapshot = new Snapshot(set);
  return { ok: true, snapshot, resourceCount: snapshot.size };
}

async function buildResourceSet(src: YamlSource, env: Env, report: FileReport): Promise<ResourceSet | undefined> {
  if (src.value === null || src.value === undefined) {
    report.add('file', 'missing mandatory _format_version');
    return undefined;
  }
  if (!isRecord(src.value)) {
    report.add('file', 'the top level must be a mapping with _format_version and resource lists', src.lineOf([]));
    return undefined;
  }
  const doc = interpolate(
    src.value,
    env,
    (path, msg) => report.add(...interpolationScope(src, path, msg), src.lineOf(path)),
  ) as Record<string, unknown>;
  const fv = doc._format_version;
  if (fv === undefined) report.add('file', 'missing mandatory _format_version');
  else if (String(fv) !== '1') {
    report.add(
      '_format_version',
      `unsupported format version "${String(fv)}" (Sluice reads "1")`,
      src.lineOf(['_format_version']),
    );
  }
  for (const k of Object.keys(doc)) {
    if (!TOP_LEVEL.has(k)) {
      report.add(k, `unknown top-level key (expected one of: ${[...TOP_LEVEL].join(', ')})`, src.lineOf([k]));
    }
  }
  const lists: Record<ResourceKind, Record<string, unknown>[]> = { provider_keys: [], models: [], api_keys: [] };
  for (const kind of RESOURCE_KINDS) {
    const raw = doc[kind];
    if (raw === undefined || raw === null) continue;
    if (!Array.isArray(raw)) {
      report.add(kind, 'must be a list', src.lineOf([kind]));
      continue;
    }
    raw.forEach((row, i) => {
      if (isRecord(row)) lists[kind].push({ ...row, __index: i });
      else report.add(`${kind}[${i}]`, 'must be a mapping', src.lineOf([kind, i]));
    });
  }

  const ctx: RowContext = { src, report, env };
  const providerKeys = await collect(
    ctx,
    'provider_keys',
    lists.provider_keys,
    (row, scope, i) => parseProviderKey(ctx, row, scope, i),
  );
  const keyIdByName = new Map(providerKeys.map((k) => [k.display_name, k.id]));
  const models = await collect(
    ctx,
    'models',
    lists.models,
    (row, scope, i) => parseModel(ctx, row, scope, i, keyIdByName),
  );
  const apiKeys = await collect(ctx, 'api_keys', lists.api_keys, (row, scope, i) => parseApiKey(ctx, row, scope, i));
  checkCrossReferences(ctx, providerKeys, models, apiKeys);
  return { provider_keys: providerKeys, models, api_keys: apiKeys };
}

interface RowContext {
  src: YamlSource;
  report: FileReport;
  env: Env;
}

type RowParser<T> = (
  row: Record<string, unknown>,
  scope: string,
  index: number,
) => Promise<T | undefined> | T | undefined;

async function collect<T extends { display_name: string; id: string }>(
  ctx: RowContext,
  kind: ResourceKind,
  rows: Record<string, unknown>[],
  parse: RowParser<T>,
): Promise<T[]> {
  const out: T[] = [];
  const seen = new Map<string, number>();
  for (const raw of rows) {
    const index = raw.__index as number;
    delete raw.__index;
    const scope = rowScope(kind, index, raw);
    const unknown = Object.keys(raw).filter((k) => !(k in SHAPES[kind]) && !SUGAR[kind].includes(k));
    for (const k of unknown) ctx.report.add(scope, `${k}: unknown field`, ctx.src.lineOf([kind, index, k]));
    // Duplicates are judged on the raw name, so a row that also fails validation is still reported.
    const name = typeof raw.display_name === 'string' ? raw.display_name : undefined;
    const prev = name === undefined ? undefined : seen.get(name);
    if (prev !== undefined) {
      ctx.report.add(
        scope,
        `duplicate display_name "${name}" (also ${kind}[${prev}])`,
        ctx.src.lineOf([kind, index, 'display_name']),
      );
    } else if (name !== undefined) seen.set(name, index);
    const parsed = await parse(raw, scope, index);
    if (parsed && prev === undefined) out.push(parsed);
  }
  return out;
}

function zodErrors(ctx: RowContext, kind: ResourceKind, index: number, scope: string, error: z.ZodError): void {
  for (const issue of error.issues) {
    const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
    const field = formatPath(path);
    ctx.report.add(scope, field ? `${field}: ${issue.message}` : issue.message, ctx.src.lineOf([kind, index, ...path]));
  }
}

async function resourceId(kind: ResourceKind, row: { id?: string; display_name: string }): Promise<string> {
  return row.id ?? (await uuidV5(`${kind}/${row.display_name}`));
}

async function parseProviderKey(
  ctx: RowContext,
  raw: Record<string, unknown>,
  scope: string,
  index: number,
): Promise<ProviderKey | undefined> {
  const row = { ...raw };
  if (row.secret !== undefined) {
    if (row.api_key !== undefined) {
      ctx.report.add(
        scope,
        'give api_key or its alias secret, not both',
        ctx.src.lineOf(['provider_keys', index, 'secret']),
      );
    }
    row.api_key = row.secret;
    delete row.secret;
  }
  const r = ProviderKeySchema.safeParse(row);
  if (!r.success) return void zodErrors(ctx, 'provider_keys', index, scope, r.error);
  const adapter = r.data.adapter ?? defaultAdapter(r.data.provider);
  const api_base = (r.data.api_base ?? DEFAULT_API_BASE[adapter])?.replace(/\/+$/, '');
  return { ...r.data, adapter, api_base, id: await resourceId('provider_keys', r.data) };
}

async function parseModel(
  ctx: RowContext,
  raw: Record<string, unknown>,
  scope: string,
  index: number,
  keyIdByName: Map<string, string>,
): Promise<Model | undefined> {
  const row = { ...raw };
  if (row.provider_key !== undefined) {
    const line = ctx.src.lineOf(['models', index, 'provider_key']);
    if (row.provider_key_id !== undefined) {
      ctx.report.add(scope, 'give provider_key (a name) or provider_key_id, not both', line);
    }
    const id = typeof row.provider_key === 'string' ? keyIdByName.get(row.provider_key) : undefined;
    if (id === undefined) {
      ctx.report.add(scope, `provider_key: no provider key named "${String(row.provider_key)}" in provider_keys`, line);
      row.provider_key_id = '__unresolved__';
    } else row.provider_key_id = id;
    delete row.provider_key;
  }
  const r = ModelSchema.safeParse(row);
  if (!r.success) return void zodErrors(ctx, 'models', index, scope, r.error);
  const id = await resourceId('models', r.data);
  return r.data.routing
    ? { ...r.data, id, kind: 'routing', routing: r.data.routing } as Model
    : { ...r.data, id, kind: 'direct' } as Model;
}

async function parseApiKey(
  ctx: RowContext,
  raw: Record<string, unknown>,
  scope: string,
  index: number,
): Promise<ApiKey | undefined> {
  const row = { ...raw };
  const line = ctx.src.lineOf(['api_keys', index, 'key_env']);
  if (row.key_env !== undefined) {
    if (row.key_hash !== undefined) ctx.report.add(scope, 'give key_env or key_hash, not both', line);
    const name = row.key_env;
    const value = typeof name === 'string' ? ctx.env[name] : undefined;
    if (typeof name !== 'string') ctx.report.add(scope, 'key_env: must be the name of an environment variable', line);
    else if (!value) {
      ctx.report.add(
        scope,
        `key_env: environment variable ${name} is ${value === undefined ? 'not set' : 'empty'}`,
        line,
      );
    }
    row.key_hash = value ? await sha256Hex(value) : '0'.repeat(64);
    delete row.key_env;
  } else if (row.key_hash === undefined) {
    ctx.report.add(
      scope,
      'needs key_env (an environment variable holding the key) or key_hash (its SHA-256)',
      ctx.src.lineOf(['api_keys', index]),
    );
    return undefined;
  }
  const r = ApiKeySchema.safeParse(row);
  if (!r.success) return void zodErrors(ctx, 'api_keys', index, scope, r.error);
  return { ...r.data, id: await resourceId('api_keys', r.data) };
}

function checkCrossReferences(ctx: RowContext, keys: ProviderKey[], models: Model[], apiKeys: ApiKey[]): void {
  const keyIds = new Set(keys.map((k) => k.id));
  const byName = new Map(models.map((m) => [m.display_name, m]));
  const indexOf = (kind: ResourceKind, name: string): number => {
    const rows = (ctx.src.value as Record<string, unknown>)[kind];
    return Array.isArray(rows) ? rows.findIndex((r) => isRecord(r) && r.display_name === name) : -1;
  };
  for (const m of models) {
    const i = indexOf('models', m.display_name);
    const scope = `models[${i}] ("${m.display_name}")`;
    if (m.kind === 'direct') {
      if (m.provider_key_id !== '__unresolved__' && !keyIds.has(m.provider_key_id)) {
        ctx.report.add(
          scope,
          `provider_key_id: no provider key with id "${m.provider_key_id}"`,
          ctx.src.lineOf(['models', i, 'provider_key_id']),
        );
      }
      continue;
    }
    m.routing.targets.forEach((t, ti) => {
      const target = byName.get(t.model);
      const line = ctx.src.lineOf(['models', i, 'routing', 'targets', ti, 'model']);
      if (!target) ctx.report.add(scope, `routing.targets[${ti}].model: no model named "${t.model}"`, line);
      else if (target.kind === 'routing') {
        ctx.report.add(
          scope,
          `routing.targets[${ti}].model: "${t.model}" is a routing model; targets must be direct models`,
          line,
        );
      }
    });
  }
  for (const k of apiKeys) {
    const i = indexOf('api_keys', k.display_name);
    k.allowed_models.forEach((name, mi) => {
      if (!name.includes('*') && !byName.has(name)) {
        ctx.report.add(
          `api_keys[${i}] ("${k.display_name}")`,
          `allowed_models[${mi}]: no model named "${name}"`,
          ctx.src.lineOf(['api_keys', i, 'allowed_models', mi]),
        );
      }
    });
  }
}
