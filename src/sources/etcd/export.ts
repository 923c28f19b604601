// `sluice export --etcd <endpoints> [--prefix /aisix] [-o file] [--with-secrets] [--user u --password-env VAR]`
// dumps an etcd prefix as a resources.yaml (format "1") that loads back through the file pipeline to the
// same resources: same ids (written as explicit `id:` fields), same canonical values.
//
// - What is exported is what a freshly started gateway would serve from the prefix (rows.ts rules with
//   no history, so no last-known-good pins): rows that would be rejected are skipped and listed in the
//   header comment and on stderr, since a file containing them would not load.
// - Unknown top-level fields are dropped (a file rejects them); listed in the header comment.
// - Provider `api_key` values become `${SLUICE_PK_<NAME>}` placeholders, listed in the header comment,
//   unless `--with-secrets`. `key_hash` is kept as-is: it is a hash, not a plaintext secret.
// - `$` in any string is written as `$$`, which the file pipeline's interpolation turns back into `$`.
//
// "Same configuration" means: the file loads to the same resource set as the etcd source serves (ids,
// values after normalisation, order). The hashes cannot match: a file's config_hash is the sha256 of
// its bytes, etcd's is over the stored key/value entries (SPEC §8).
import { Document } from 'yaml';
import type { Command } from '../../cli.ts';
import type { Platform } from '../../platform.ts';
import type { ResourceKind } from '../../resources/schema.ts';
import { EtcdClient, type EtcdKv } from './client.ts';
import { compareKeys, decideServing, normalizePrefix, type RowValue, rowValue } from './rows.ts';

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
  const values = new Map<string, RowValue>();
  for (const kv of kvs) {
    values.set(kv.key, rowValue(prefix, kv.key, kv.value, kv.invalidUtf8 ? { invalidUtf8: true } : {}));
  }
  const keys = [...values.keys()].sort(compareKeys);
  const decision = decideServing(keys, (k) => values.get(k), new Map());

  const lists: Record<ResourceKind, Json[]> = { provider_keys: [], models: [], api_keys: [] };
  const variables: { name: string; what: string }[] = [];
  const taken = new Set<string>();
  const dropped = new Map<string, number>();
  for (const key of keys) {
    const v = decision.served.get(key);
    if (!v) continue;
    const row = v.parsed;
    const raw = JSON.parse(v.raw) as Record<string, Json>;
    for (const f of row.unknownFields) {
      delete raw[f];
      dropped.set(`${row.kind}.${f}`, (dropped.get(`${row.kind}.${f}`) ?? 0) + 1);
    }
    delete raw.id;
    const out = escapeDollars(raw) as Record<string, Json>;
    if (row.kind === 'provider_keys' && typeof raw.api_key === 'string' && !opts.withSecrets) {
      const name = variableName(row.resource.display_name, taken);
      variables.push({ name, what: `provider_keys "${row.resource.display_name}"` });
      out.api_key = `\${${name}}`;
    }
    lists[row.kind].push({ id: row.id, ...out });
  }
  const skipped = [...decision.problems].map(([key, p]) => ({ key, error: `${p.errorKind}: ${p.error}` }));

  const resources = lists.provider_keys.length + lists.models.length + lists.api_keys.length;
  const header = [
    ` Exported by \`sluice export\` from ${opts.source}, prefix ${prefix}/, revision ${opts.revision}: ${resources} resource(s).`,
    ' Ids are explicit, so the file loads to the same resources the etcd source serves.',
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
  const doc = new Document({ _format_version: '1', ...lists });
  doc.commentBefore = header.join('\n');
  return { yaml: doc.toString({ lineWidth: 0 }), resources, skipped, variables: variables.map((v) => v.name) };
}

export async function runExport(platform: Platform, cmd: Extract<Command, { kind: 'export' }>): Promise<number> {
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
