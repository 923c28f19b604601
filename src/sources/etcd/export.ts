// `sluice export` (docs/etcd.md "Export"): an etcd prefix as a resources.yaml (format "1") that loads back
// through the file pipeline to the resource set a freshly started gateway would serve from it (ids, values
// after normalisation, order). The hashes cannot match: a file's is over its bytes, etcd's over its rows.
// `$` in any string is written as `$$`, which the file pipeline's interpolation turns back into `$`.
import { Document } from 'yaml';
import type { Platform } from '../../platform.ts';
import { EtcdClient, type EtcdKv } from './client.ts';
import { Snapshot } from '../../resources/snapshot.ts';
import { compareKeys, normalizePrefix, resourceSet, type RowValue, rowValue, type ServedValue } from './rows.ts';

/** The kinds the export writes (guardrails are reported as skipped). */
type ExportedKind = 'provider_keys' | 'models' | 'api_keys' | 'cache_policies';

export interface ExportResult {
  yaml: string;
  resources: number;
  /** Rows left out because they would not load, with why. */
  skipped: { key: string; error: string }[];
  /** Environment variables the file's placeholders need. */
  variables: string[];
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

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

function variableName(displayName: string, taken: Set<string>): string {
  const base = `SLUICE_PK_${displayName.toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_+|_+$/g, '') || 'KEY'}`;
  let name = base;
  for (let n = 2; taken.has(name); n++) name = `${base}_${n}`;
  taken.add(name);
  return name;
}

/** Builds the resources.yaml text for the rows of one range. Pure. */
export function exportResources(
  kvs: readonly EtcdKv[],
  prefixIn: string,
  opts: { withSecrets: boolean; revision: number; source: string },
): ExportResult {
  const prefix = normalizePrefix(prefixIn);
  const { keys, served, skipped, dropped } = servedRows(kvs, prefix);
  const names = expressible(new Snapshot(resourceSet(keys, served)));
  const { lists, variables } = fileEntries(keys, served, names, opts.withSecrets, skipped);
  const resources = lists.provider_keys.length + lists.models.length + lists.api_keys.length +
    lists.cache_policies.length;
  const header = [
    ` Exported by \`sluice export\` from ${opts.source}, prefix ${prefix}/, revision ${opts.revision}: ${resources} resource(s).`,
    ' A file carries no ids (they are derived from the names); references are written by name.',
  ];
  if (variables.length > 0) {
    header.push(' Provider api keys are ${VAR} placeholders; set these environment variables before loading:');
    for (const v of variables) header.push(`   ${v.name}  (${v.what})`);
  }
  if (opts.withSecrets && lists.provider_keys.length > 0) {
    header.push(' CONTAINS PLAINTEXT PROVIDER API KEYS (--with-secrets): protect this file.');
  }
  if (dropped.size > 0) {
    header.push(' Unknown fields dropped (not part of format "1"):');
    for (const [f, n] of dropped) header.push(`   ${f} (${n} row(s))`);
  }
  if (skipped.length > 0) {
    header.push(` Skipped ${skipped.length} row(s) that would not load:`);
    for (const s of skipped) header.push(`   ${s.key}: ${s.error}`);
  }
  const { cache_policies, ...core } = lists;
  const doc = new Document({ _format_version: '1', ...core, ...(cache_policies.length > 0 ? { cache_policies } : {}) });
  doc.commentBefore = header.join('\n');
  return { yaml: doc.toString({ lineWidth: 0 }), resources, skipped, variables: variables.map((v) => v.name) };
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
  const skipped: { key: string; error: string }[] = [];
  const dropped = new Map<string, number>();
  for (const key of keys) {
    const v = values.get(key)!; // non-null: keys come from values
    const p = v.parsed;
    if (!p.ok) skipped.push({ key, error: `${p.errorKind}: ${p.error}` });
    else if (p.resource === undefined) skipped.push({ key, error: `${p.kind}: a kind Sluice does not serve` });
    else if (p.kind === 'observability_exporters') {
      skipped.push({ key, error: 'observability_exporters: not exported (its headers may hold credentials)' });
    } else {
      served.set(key, v as ServedValue);
      for (const f of p.unknownFields) dropped.set(`${p.kind}.${f}`, (dropped.get(`${p.kind}.${f}`) ?? 0) + 1);
    }
  }
  return { keys, served, skipped, dropped };
}

interface Expressible {
  /** `<kind>/<id>` of every row a file can express. */
  winners: Set<string>;
  /** Provider key id → the name a model refers to it by. */
  pkNames: Map<string, string>;
  modelNames: Set<string>;
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
  for (const k of snapshot.resources.api_keys) {
    if (snapshot.apiKeyByHash(k.key_hash) === k) winners.add(`api_keys/${k.id}`);
  }
  // A file's names are unique: the first policy of a name is the one a request would match first.
  const policyNames = new Set<string>();
  for (const p of snapshot.cachePolicies) {
    if (!policyNames.has(p.name)) winners.add(`cache_policies/${p.id}`);
    policyNames.add(p.name);
  }
  return { winners, pkNames, modelNames };
}

/** The file's entries per collection, references by name, secrets as placeholders unless `withSecrets`. */
function fileEntries(
  keys: readonly string[],
  served: ReadonlyMap<string, ServedValue>,
  { winners, pkNames, modelNames }: Expressible,
  withSecrets: boolean,
  skipped: { key: string; error: string }[],
): { lists: Record<ExportedKind, Json[]>; variables: { name: string; what: string }[] } {
  const lists: Record<ExportedKind, Json[]> = { provider_keys: [], models: [], api_keys: [], cache_policies: [] };
  const variables: { name: string; what: string }[] = [];
  const taken = new Set<string>();
  const apiKeyNames = new Set<string>();
  for (const key of keys) {
    const v = served.get(key);
    if (!v) continue;
    const row = v.parsed;
    if (row.resource === undefined || row.kind === 'observability_exporters') continue; // (skipped above)
    if (row.kind === 'guardrails' || row.kind === 'guardrail_attachments') {
      skipped.push({ key, error: 'guardrails are not exported yet: copy them into the file by hand' });
      continue;
    }
    if (!winners.has(`${row.kind}/${row.id}`)) {
      skipped.push({
        key,
        error: 'not expressible in a file: a name or key hash another row holds, or an unserved reference',
      });
      continue;
    }
    const entry = JSON.parse(JSON.stringify(row.resource)) as Record<string, Json>;
    delete entry.id;
    if (row.kind === 'models') {
      delete entry.kind;
      if (row.resource.kind === 'direct') {
        delete entry.provider_key_id;
        entry.provider_key = pkNames.get(row.resource.provider_key_id)!; // non-null: winners have their key
      }
    }
    if (row.kind === 'api_keys') {
      let name = row.resource.display_name || row.id;
      if (apiKeyNames.has(name)) name = `${name} (${row.id})`;
      apiKeyNames.add(name);
      entry.display_name = name;
      entry.allowed_models = row.resource.allowed_models.filter((n) => n.includes('*') || modelNames.has(n));
    }
    const out = escapeDollars(entry) as Record<string, Json>;
    if (row.kind === 'provider_keys' && typeof entry.api_key === 'string' && !withSecrets) {
      const name = variableName(row.resource.display_name, taken);
      variables.push({ name, what: `provider_keys "${row.resource.display_name}"` });
      out.api_key = `\${${name}}`;
    }
    lists[row.kind as ExportedKind].push(out);
  }
  return { lists, variables };
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
  for (const s of r.skipped) err(`export: skipped ${s.key}: ${s.error}`);
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
  err(
    `export: wrote ${r.resources} resource(s) from ${prefix}/ at revision ${range.revision}${
      cmd.output ? ` to ${cmd.output}` : ''
    }` +
      (r.variables.length > 0 ? `; set ${r.variables.join(', ')} before loading` : ''),
  );
  return 0;
}
