// `sluice export` (docs/etcd.md "Export"; AISIX's `aisix export`): an etcd prefix as a resources.yaml
// (format "1") that loads back through the file pipeline to the resource set a freshly started gateway would serve from it (ids, values
// after normalisation, order). The hashes cannot match: a file's is over its bytes, etcd's over its rows.
// `$` in any string is written as `$$`, which the file pipeline's interpolation turns back into `$`.
import { Document } from 'yaml';
import type { Platform } from '../../platform.ts';
import { identityOf } from '../../resources/entries.ts';
import { FILE_COLLECTIONS, KINDS } from '../../resources/kinds.ts';
import { EtcdClient, type EtcdKv } from './client.ts';
import { Snapshot } from '../../resources/snapshot.ts';
import type { ClaimMapping } from '../../resources/identity-schema.ts';
import { type Json, placeholderCollisions, redactSecrets, type SecretPlaceholder } from './export-secrets.ts';
import { compareKeys, normalizePrefix, resourceSet, type RowValue, rowValue, type ServedValue } from './rows.ts';

/** A row left out of the file: `rejected` by the row checks, or not `expressible` in a file. */
export interface SkippedRow {
  key: string;
  why: 'rejected' | 'not_expressible';
  error: string;
}

export interface ExportResult {
  yaml: string;
  resources: number;
  /** Rows left out, with why: any makes `sluice export` exit 1. */
  skipped: SkippedRow[];
  /** The `${VAR}`s the file needs (none with `withSecrets`). */
  placeholders: SecretPlaceholder[];
  /** What the operator should know that still yields a loadable file. */
  warnings: string[];
}

/** `$` → `$$` in every string value (not in mapping keys), so interpolation restores it. */
function escapeDollars(v: Json): Json {
  if (typeof v === 'string') return v.replaceAll('$', '$$$$');
  if (Array.isArray(v)) return v.map(escapeDollars);
  if (v && typeof v === 'object') {
    const out: { [k: string]: Json } = {};
    for (const [k, x] of Object.entries(v)) out[k] = escapeDollars(x);
    return out;
  }
  return v;
}

/** AISIX's name for an api key in a file (its rows carry none): from the already-safe `key_hash`. */
export function apiKeyFileName(keyHash: string): string {
  return `apikey-${keyHash.slice(0, 16)}`;
}

/** Builds the resources.yaml text for the rows of one range. Pure. */
export function exportResources(
  kvs: readonly EtcdKv[],
  prefixIn: string,
  opts: { withSecrets: boolean; revision: number; source: string },
): ExportResult {
  const prefix = normalizePrefix(prefixIn);
  const { keys, values, served, skipped, dropped } = servedRows(kvs, prefix);
  const names = expressible(new Snapshot(resourceSet(keys, served)));
  const lists = fileEntries(keys, served, names, skipped);
  for (const p of policyEntries(keys, served, names, skipped)) push(lists, 'rate_limit_policies', p);
  const narrow = narrowGuardrails(keys, values);
  const other = otherEntries(keys, values, served, narrow.leftOut, skipped);
  const placeholders: SecretPlaceholder[] = [];
  const collections: Record<string, Json[]> = {};
  let resources = 0;
  for (const kind of FILE_COLLECTIONS) {
    const entries = [...(lists.get(kind) ?? []), ...(other.get(kind) ?? [])].map((e) => {
      const out = escapeDollars(e.entry) as { [k: string]: Json };
      if (!opts.withSecrets) redactSecrets(kind, e.identity, out, placeholders);
      return out;
    });
    if (entries.length === 0) continue;
    collections[kind] = entries;
    resources += entries.length;
  }
  const header = [
    ` Exported by \`sluice export\` from ${opts.source}, prefix ${prefix}/, revision ${opts.revision}: ${resources} resource(s).`,
    ' A file carries no ids (they are derived from the names); references are written by name.',
  ];
  if (dropped.size > 0) {
    header.push(' Unknown fields dropped (not part of format "1"):');
    for (const [f, n] of dropped) header.push(`   ${f} (${n} row(s))`);
  }
  if (skipped.length > 0) {
    header.push(` Left out ${skipped.length} row(s):`);
    for (const s of skipped) header.push(`   ${s.key}: ${s.error}`);
  }
  const doc = new Document({ _format_version: '1', ...collections });
  doc.commentBefore = header.join('\n');
  return {
    yaml: doc.toString({ lineWidth: 0 }),
    resources,
    skipped,
    placeholders,
    warnings: [...narrow.warnings, ...placeholderCollisions(placeholders)],
  };
}

/**
 * A file applies every guardrail to the whole environment (it has no attachments), so only the guardrails
 * that do so here are written (AISIX's): those with an enabled `env` attachment, and those with no attachment
 * at all (which apply everywhere already). The others, and every attachment row, are left out; each left-out
 * guardrail is a warning, not a failure.
 */
function narrowGuardrails(
  keys: readonly string[],
  values: ReadonlyMap<string, RowValue>,
): { leftOut: Set<string>; warnings: string[] } {
  const attached = new Set<string>();
  const envWide = new Set<string>();
  const leftOut = new Set<string>();
  for (const key of keys) {
    const p = values.get(key)!.parsed; // non-null: keys come from values
    if (!p.ok || p.kind !== 'guardrail_attachments' || p.resource === undefined) continue;
    leftOut.add(key);
    attached.add(p.resource.guardrail_id);
    if (p.resource.enabled && p.resource.scope_type === 'env') envWide.add(p.resource.guardrail_id);
  }
  const warnings: string[] = [];
  for (const key of keys) {
    const p = values.get(key)!.parsed;
    if (!p.ok || p.kind !== 'guardrails' || p.resource === undefined) continue;
    if (!attached.has(p.resource.id) || envWide.has(p.resource.id)) continue;
    leftOut.add(key);
    warnings.push(
      `guardrails "${p.resource.name}" left out: it is not attached to the whole environment, and a file would apply it everywhere`,
    );
  }
  return { leftOut, warnings };
}

/** Each row judged alone, with no history: the rows a fresh gateway would serve, and those it would not. */
function servedRows(kvs: readonly EtcdKv[], prefix: string) {
  const values = new Map<string, RowValue>();
  for (const kv of kvs) {
    values.set(
      kv.key,
      rowValue(prefix, kv.key, kv.value, { ...(kv.invalidUtf8 ? { invalidUtf8: true } : {}), rev: kv.modRevision }),
    );
  }
  const keys = [...values.keys()].sort(compareKeys);
  const served = new Map<string, ServedValue>();
  const skipped: SkippedRow[] = [];
  const dropped = new Map<string, number>();
  for (const key of keys) {
    const v = values.get(key)!; // non-null: keys come from values
    const p = v.parsed;
    if (!p.ok) skipped.push({ key, why: 'rejected', error: `${p.errorKind}: ${p.error}` });
    // Exporters and guardrails are written as stored (their secrets redacted), like the kinds Sluice does not
    // serve: what is served of them is built from the row, not a file entry.
    else if (p.resource !== undefined && KINDS[p.kind].export !== 'as_stored') {
      served.set(key, v as ServedValue);
      for (const f of p.unknownFields) dropped.set(`${p.kind}.${f}`, (dropped.get(`${p.kind}.${f}`) ?? 0) + 1);
    }
  }
  return { keys, values, served, skipped, dropped };
}

interface Expressible {
  /** `<kind>/<id>` of every row a file can express. */
  winners: Set<string>;
  /** Provider key id → the name a model refers to it by. */
  pkNames: Map<string, string>;
  modelNames: Set<string>;
  /** Model id / api key id → the name the file writes it under (written rows only). */
  modelNameById: Map<string, string>;
  apiKeyNameById: Map<string, string>;
}

/** What the name indexes keep: the row written last under each name (api keys: each key hash). */
function expressible(snapshot: Snapshot): Expressible {
  const pkNames = new Map<string, string>();
  const winners = new Set<string>();
  const nameWinner = new Map<string, string>();
  for (const k of snapshot.resources.provider_keys) nameWinner.set(`p\0${k.display_name}`, k.id);
  for (const m of snapshot.resources.models) nameWinner.set(`m\0${m.display_name}`, m.id);
  for (const k of snapshot.resources.provider_keys) {
    if (nameWinner.get(`p\0${k.display_name}`) === k.id) {
      winners.add(`provider_keys/${k.id}`);
      pkNames.set(k.id, k.display_name);
    }
  }
  const modelNames = new Set<string>();
  for (const m of snapshot.resources.models) {
    if (nameWinner.get(`m\0${m.display_name}`) === m.id) modelNames.add(m.display_name);
  }
  for (const m of snapshot.resources.models) {
    if (nameWinner.get(`m\0${m.display_name}`) !== m.id) continue;
    if (m.kind === 'direct' && !pkNames.has(m.provider_key_id)) continue;
    if (m.kind === 'routing' && m.routing.targets.some((t) => !modelNames.has(t.model))) continue;
    winners.add(`models/${m.id}`);
  }
  const modelNameById = new Map<string, string>();
  for (const m of snapshot.resources.models) if (winners.has(`models/${m.id}`)) modelNameById.set(m.id, m.display_name);
  const apiKeyNameById = new Map<string, string>();
  for (const k of snapshot.resources.api_keys) {
    if (snapshot.apiKeyByHash(k.key_hash) !== k) continue;
    winners.add(`api_keys/${k.id}`);
    apiKeyNameById.set(k.id, apiKeyFileName(k.key_hash));
  }
  // A passthrough route's references must be written by name; the first route of a name is kept.
  const routeNames = new Set<string>();
  for (const r of snapshot.of('passthrough_routes')) {
    if (routeNames.has(r.name)) continue;
    routeNames.add(r.name);
    if (r.provider_key_id !== undefined && !pkNames.has(r.provider_key_id)) continue;
    if (r.anonymous_key_id !== undefined && !apiKeyNameById.has(r.anonymous_key_id)) continue;
    winners.add(`passthrough_routes/${r.id}`);
  }
  // A file's names are unique: the first policy of a name is the one a request would match first.
  const policyNames = new Set<string>();
  for (const p of snapshot.cachePolicies) {
    if (!policyNames.has(p.name)) winners.add(`cache_policies/${p.id}`);
    policyNames.add(p.name);
  }
  // OIDC providers and claim mappings: the first of a name; a mapping only when the file writes its key.
  const identityNames = new Set<string>();
  for (const kind of ['oidc_providers', 'claim_mappings'] as const) {
    for (const r of snapshot.of(kind)) {
      const name = `${kind}\0${r.name}`;
      const reachable = kind === 'oidc_providers' || apiKeyNameById.has((r as ClaimMapping).resolve.api_key_id);
      if (!identityNames.has(name) && reachable) winners.add(`${kind}/${r.id}`);
      identityNames.add(name);
    }
  }
  return { winners, pkNames, modelNames, modelNameById, apiKeyNameById };
}

/** One entry of a collection, before `$` escaping and redaction. */
interface FileEntry {
  identity: string;
  entry: { [k: string]: Json };
}

/** The served kinds' entries per collection, normalised, references by name. */
function fileEntries(
  keys: readonly string[],
  served: ReadonlyMap<string, ServedValue>,
  { winners, pkNames, modelNames, apiKeyNameById }: Expressible,
  skipped: SkippedRow[],
): Map<string, FileEntry[]> {
  const lists = new Map<string, FileEntry[]>();
  const apiKeyNames = new Set<string>();
  for (const key of keys) {
    const v = served.get(key);
    if (!v) continue;
    const row = v.parsed;
    if (row.resource === undefined || KINDS[row.kind].export !== 'entries') continue; // policyEntries, otherEntries
    if (!winners.has(`${row.kind}/${row.id}`)) {
      skipped.push({
        key,
        why: 'not_expressible',
        error: 'not expressible in a file: a name or key hash another row holds, or an unserved reference',
      });
      continue;
    }
    const entry = JSON.parse(JSON.stringify(row.resource)) as { [k: string]: Json };
    delete entry.id;
    let identity = identityOf(row.kind, row.resource) ?? ''; // an api key's is set below
    if (row.kind === 'models') {
      delete entry.kind;
      // A semantic router's targets are derived from its block when read (src/resources/documents.ts).
      if (row.resource.semantic !== undefined) delete entry.routing;
      // A classifier's key by name, as a file names keys; an id no key holds stays (it fails at run time).
      const classifier = (entry.semantic as { [k: string]: Json } | undefined)?.classifier as
        | { [k: string]: Json }
        | undefined;
      const classifierKey = classifier ? pkNames.get(String(classifier.provider_key_id)) : undefined;
      if (classifier && classifierKey !== undefined) {
        delete classifier.provider_key_id;
        classifier.provider_key = classifierKey;
      }
      if (row.resource.kind === 'direct') {
        delete entry.provider_key_id;
        entry.provider_key = pkNames.get(row.resource.provider_key_id)!; // non-null: winners have their key
      }
    }
    if (row.kind === 'claim_mappings') {
      entry.resolve = { api_key: apiKeyNameById.get(row.resource.resolve.api_key_id)! }; // non-null: a winner's
    }
    if (row.kind === 'passthrough_routes') {
      const { provider_key_id: pk, anonymous_key_id: anon } = row.resource;
      delete entry.provider_key_id;
      delete entry.anonymous_key_id;
      if (pk !== undefined) entry.provider_key = pkNames.get(pk)!; // non-null: winners have their key
      if (anon !== undefined) entry.anonymous_key = apiKeyNameById.get(anon)!;
    }
    if (row.kind === 'api_keys') {
      identity = apiKeyFileName(row.resource.key_hash);
      if (apiKeyNames.has(identity)) {
        skipped.push({
          key,
          why: 'not_expressible',
          error: `not expressible in a file: another key is also ${identity}`,
        });
        continue;
      }
      apiKeyNames.add(identity);
      entry.display_name = identity;
      entry.allowed_models = row.resource.allowed_models.filter((n) => n.includes('*') || modelNames.has(n));
    }
    push(lists, row.kind, { identity, entry });
  }
  return lists;
}

/**
 * The policies, references by name as a file writes them (`scope_ref` of an api_key / model scope, condition
 * leaves on those dimensions); one naming a row the file does not hold cannot be written.
 */
function policyEntries(
  keys: readonly string[],
  served: ReadonlyMap<string, ServedValue>,
  { modelNameById, apiKeyNameById }: Expressible,
  skipped: SkippedRow[],
): FileEntry[] {
  const out: FileEntry[] = [];
  const seen = new Set<string>();
  for (const key of keys) {
    const row = served.get(key)?.parsed;
    if (row?.kind !== 'rate_limit_policies') continue;
    const { id: _id, form: _form, ...rest } = row.resource;
    const entry = JSON.parse(JSON.stringify(rest)) as { [k: string]: Json };
    let dangling: string | undefined;
    const nameOf = (dim: string, id: Json): Json => {
      const name = typeof id === 'string' ? (dim === 'model' ? modelNameById : apiKeyNameById).get(id) : undefined;
      if (name === undefined) dangling ??= `${dim} ${JSON.stringify(id)}`;
      return name ?? id;
    };
    if (entry.scope === 'api_key' || entry.scope === 'model') entry.scope_ref = nameOf(entry.scope, entry.scope_ref!);
    const walk = (n: Json): void => {
      if (!n || typeof n !== 'object' || Array.isArray(n)) return;
      if (Array.isArray(n.children)) return n.children.forEach(walk);
      if (n.dimension !== 'api_key' && n.dimension !== 'model') return;
      const dim = n.dimension;
      n.value = Array.isArray(n.value) ? n.value.map((v) => nameOf(dim, v)) : nameOf(dim, n.value!);
    };
    if (Array.isArray(entry.conditions)) entry.conditions.forEach(walk);
    const why = dangling !== undefined
      ? `not expressible in a file: it references ${dangling}, which the file does not hold`
      : seen.has(row.resource.name)
      ? 'not expressible in a file: a name another row holds'
      : undefined;
    if (why) {
      skipped.push({ key, why: 'not_expressible', error: why });
      continue;
    }
    seen.add(row.resource.name);
    out.push({ identity: row.resource.name, entry });
  }
  return out;
}

function push<T>(m: Map<string, T[]>, k: string, v: T): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}

/**
 * The rows of the kinds Sluice accepts without serving, as stored (without `id`): the file pipeline takes
 * them unchecked, so they load back as they were.
 */
function otherEntries(
  keys: readonly string[],
  values: ReadonlyMap<string, RowValue>,
  served: ReadonlyMap<string, ServedValue>,
  leftOut: ReadonlySet<string>,
  skipped: SkippedRow[],
): Map<string, FileEntry[]> {
  const lists = new Map<string, FileEntry[]>();
  const seen = new Set<string>();
  for (const key of keys) {
    const v = values.get(key)!; // non-null: keys come from values
    if (!v.parsed.ok || served.has(key) || leftOut.has(key)) continue;
    const kind = v.parsed.kind;
    const leave = (error: string) => skipped.push({ key, why: 'not_expressible', error });
    if (!(FILE_COLLECTIONS as readonly string[]).includes(kind)) {
      leave(`not expressible in a file: format "1" has no ${kind} collection`);
      continue;
    }
    const entry = JSON.parse(v.text) as { [k: string]: Json };
    const identity = identityOf(kind, entry);
    if (identity === undefined || seen.has(`${kind}\0${identity}`)) {
      leave(`not expressible in a file: ${identity === undefined ? 'no name' : 'a name another row holds'}`);
      continue;
    }
    seen.add(`${kind}\0${identity}`);
    delete entry.id;
    push(lists, kind, { identity, entry });
  }
  return lists;
}

/** `sluice export`'s arguments, as src/cli.ts parses them. */
export interface ExportCommand {
  endpoints: string[];
  prefix: string;
  output?: string;
  withSecrets: boolean;
  user?: string;
  passwordEnv?: string;
}

export async function runExport(platform: Platform, cmd: ExportCommand): Promise<number> {
  const err = (line: string): void => platform.writeLog(line);
  let password: string | undefined;
  if (cmd.passwordEnv) {
    password = platform.env[cmd.passwordEnv];
    if (!password) {
      err(
        `export: --password-env: environment variable ${cmd.passwordEnv} is ${
          password === undefined ? 'not set' : 'empty'
        }`,
      );
      return 1;
    }
  }
  if (cmd.endpoints.length === 0) {
    err('export: --etcd needs at least one endpoint');
    return 2;
  }
  if (!cmd.output && !platform.writeOut) {
    err('export: this runtime cannot write to stdout; pass -o <file>');
    return 2;
  }
  const prefix = normalizePrefix(cmd.prefix);
  const client = new EtcdClient({
    endpoints: cmd.endpoints,
    ...(cmd.user ? { user: cmd.user } : {}),
    ...(password !== undefined ? { password } : {}),
  });
  let range;
  try {
    range = await client.range(`${prefix}/`);
  } catch (e) {
    err(`export: cannot read ${prefix}/ from etcd: ${client.redact((e as Error).message)}`);
    return 1;
  }
  const r = exportResources(range.kvs, prefix, {
    withSecrets: cmd.withSecrets,
    revision: range.revision,
    source: cmd.endpoints.join(','),
  });
  if (cmd.output) {
    if (!platform.files) {
      err('export: this runtime has no file access; omit -o to write to stdout');
      return 2;
    }
    try {
      await platform.files.writeAtomic(cmd.output, new TextEncoder().encode(r.yaml));
    } catch (e) {
      err(`export: cannot write ${cmd.output}: ${(e as Error).message}`);
      return 1;
    }
  } else {
    platform.writeOut!(r.yaml); // non-null: checked above
  }
  err(`Exported ${r.resources} resource(s) to ${cmd.output ?? 'stdout'} (${prefix}/ at revision ${range.revision})`);
  for (const line of exportReport(r, cmd.withSecrets)) err(line);
  return r.skipped.length > 0 ? 1 : 0;
}

/** The stderr report after the file is written: AISIX's wording, one line per `writeLog`. */
export function exportReport(r: ExportResult, withSecrets: boolean): string[] {
  const lines: string[] = [];
  const rejected = r.skipped.filter((s) => s.why === 'rejected');
  const unexpressible = r.skipped.filter((s) => s.why === 'not_expressible');
  if (rejected.length > 0) {
    lines.push(
      `warning: ${rejected.length} etcd entr(ies) were rejected during decode and omitted from the export:`,
      ...rejected.map((s) => `  - ${s.key}: ${s.error}`),
    );
  }
  for (const w of r.warnings) lines.push(`warning: ${w}`);
  if (withSecrets && r.resources > 0) {
    lines.push(
      'warning: --reveal-secrets emitted live credentials inline; treat the output as a secret and do not commit it.',
    );
  }
  const vars = [
    ...new Set(r.placeholders.map((p) => `  ${p.envVar} — ${p.kind} ${JSON.stringify(p.identity)} ${p.field}`)),
  ]
    .sort();
  if (vars.length > 0) {
    lines.push(
      `${vars.length} secret value(s) were replaced with \${VAR} placeholders. Set each variable to the real credential in the gateway's environment before loading this file:`,
      ...vars,
    );
  }
  if (unexpressible.length > 0) {
    lines.push(
      `${unexpressible.length} row(s) cannot be written to the file — fix them in the source and re-export (or run \`sluice validate\` on the file):`,
      ...unexpressible.map((s) => `  - ${s.key}: ${s.error}`),
    );
  }
  if (r.skipped.length > 0) {
    lines.push(`export: ${r.skipped.length} row(s) left out; the file does not hold the whole deployment (exit 1)`);
  }
  return lines;
}
