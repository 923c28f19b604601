// Load `config.yaml`: parse, apply `AISIX_<SECTION>__<KEY>` environment overrides, set aside the AISIX
// keys Sluice ignores, validate, and resolve relative file paths against the config file's folder.
import { parse as parseYamlScalar } from 'yaml';
import type { z } from 'zod';
import { FileReport, formatPath, parseYaml, type YamlSource } from '../util/report.ts';
import { type Config, ConfigSchema, isIgnoredKey, REFUSED_KEYS } from './schema.ts';

type ZodIssue = z.ZodError['issues'][number];

export type ConfigResult =
  | { ok: true; config: Config; ignoredKeys: string[] }
  | { ok: false; report: FileReport };

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const TOP_LEVEL_SCALARS = new Set(['resources_file', 'bedrock_endpoint_url']);

/** `AISIX_PROXY__ADDR=0.0.0.0:3000` → proxy.addr. Values are read as YAML scalars (numbers, booleans, lists). */
export function envOverrides(
  env: Record<string, string | undefined>,
): { path: string[]; value: unknown; name: string }[] {
  const out: { path: string[]; value: unknown; name: string }[] = [];
  for (const [name, raw] of Object.entries(env)) {
    if (!name.startsWith('AISIX_') || name === 'AISIX_CONFIG' || raw === undefined) continue;
    const path = name.slice('AISIX_'.length).split('__').map((s) => s.toLowerCase());
    if (path.some((p) => p === '')) continue;
    // `AISIX_<SECTION>__<KEY>` is an override; a single-segment name only when it is a top-level key, so
    // unrelated variables that happen to start with AISIX_ (AISIX_API_KEY…) never stop a boot.
    if (path.length === 1 && !TOP_LEVEL_SCALARS.has(path[0]!)) continue;
    let value: unknown = raw;
    try {
      value = parseYamlScalar(raw);
    } catch {
      // Not valid YAML: keep the raw string and let the schema say what is wrong with it.
    }
    out.push({ path, value, name });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

function getPath(obj: Obj, path: string[]): unknown {
  let cur: unknown = obj;
  for (const seg of path) cur = isObj(cur) ? cur[seg] : undefined;
  return cur;
}

function setPath(obj: Obj, path: string[], value: unknown): void {
  let cur = obj;
  for (const seg of path.slice(0, -1)) {
    if (!isObj(cur[seg])) cur[seg] = {};
    cur = cur[seg] as Obj;
  }
  cur[path[path.length - 1]!] = value;
}

/** Remove ignored AISIX keys from `obj` in place; returns their dotted paths. */
function stripIgnored(obj: Obj, prefix = ''): string[] {
  const found: string[] = [];
  for (const key of Object.keys(obj)) {
    const path = prefix ? `${prefix}.${key}` : key;
    if (isIgnoredKey(path)) {
      found.push(path);
      delete obj[key];
    } else if (isObj(obj[key])) {
      found.push(...stripIgnored(obj[key] as Obj, path));
    }
  }
  return found;
}

export function dirname(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? '.' : i === 0 ? '/' : path.slice(0, i);
}

export function resolvePath(base: string, p: string): string {
  return p.startsWith('/') ? p : `${base.endsWith('/') ? base.slice(0, -1) : base}/${p}`;
}

export function loadConfig(file: string, text: string, env: Record<string, string | undefined>): ConfigResult {
  const report = new FileReport('config file', file);
  const src = parseYaml(text, report);
  if (!src) return { ok: false, report };
  const value = src.value ?? {};
  if (!isObj(value)) {
    report.add('file', 'the top level must be a mapping of sections (proxy, admin, …)', src.lineOf([]));
    return { ok: false, report };
  }
  const fromEnv = applyEnvOverrides(value, env);
  refuseKeys(value, fromEnv, src, report);
  if (!report.ok) return { ok: false, report };
  const ignoredKeys = stripIgnored(value);
  const r = ConfigSchema.safeParse(value);
  if (!r.success) {
    reportIssues(r.error.issues, fromEnv, src, report);
    return { ok: false, report };
  }
  resolvePaths(r.data, dirname(file));
  return { ok: true, config: r.data, ignoredKeys };
}

/** Set each `AISIX_<SECTION>__<KEY>` into `value`; returns dotted key → the variable that set it. */
function applyEnvOverrides(value: Obj, env: Record<string, string | undefined>): Map<string, string> {
  const fromEnv = new Map<string, string>();
  for (const o of envOverrides(env)) {
    setPath(value, o.path, o.value);
    fromEnv.set(o.path.join('.'), o.name);
  }
  return fromEnv;
}

/** `advice` with where it came from: the environment variable that set the key, else the key's own line. */
function addAt(
  report: FileReport,
  src: YamlSource,
  key: string,
  path: (string | number)[],
  advice: string,
  envName: string | undefined,
): void {
  report.add(
    key,
    envName ? `${advice} (from environment variable ${envName})` : advice,
    envName ? undefined : src.lineOf(path),
  );
}

/** AISIX keys Sluice refuses rather than ignores, each reported with what to do instead. */
function refuseKeys(value: Obj, fromEnv: Map<string, string>, src: YamlSource, report: FileReport): void {
  for (const [path, advice] of Object.entries(REFUSED_KEYS)) {
    const segs = path.split('.');
    const parent = getPath(value, segs.slice(0, -1));
    if (isObj(parent) && parent[segs[segs.length - 1]!] !== undefined) {
      const envName = [...fromEnv].find(([k]) => k === path || k.startsWith(`${path}.`))?.[1];
      addAt(report, src, path, segs, advice, envName);
    }
  }
}

/** The schema's issues as report entries, on the key's line or naming the environment variable that set it. */
function reportIssues(
  issues: readonly ZodIssue[],
  fromEnv: Map<string, string>,
  src: YamlSource,
  report: FileReport,
): void {
  for (const issue of issues) {
    const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
    const dotted = formatPath(path);
    if (issue.code === 'unrecognized_keys') {
      // One entry per key, on the key's own line (or naming the environment variable that set it).
      for (const k of issue.keys) {
        addAt(report, src, dotted || 'file', [...path, k], `unknown key "${k}"`, fromEnv.get(formatPath([...path, k])));
      }
      continue;
    }
    addAt(report, src, dotted || 'file', path, issue.message, fromEnv.get(dotted));
  }
}

/**
 * Every file path config.yaml holds: a relative one is resolved against the config file's folder
 * (docs/configuration.md). A key that names a file belongs here, or it is read against the working folder.
 */
export const PATH_KEYS = [
  'resources_file',
  'etcd.tls.ca_cert_file',
  'etcd.tls.client_cert_file',
  'etcd.tls.client_key_file',
  'proxy.tls.cert_file',
  'proxy.tls.key_file',
  'admin.tls.cert_file',
  'admin.tls.key_file',
  'upstream.tls.ca_file',
  'upstream.tls.client_cert_file',
  'upstream.tls.client_key_file',
  'ratelimit.redis.tls.ca_file',
  'ratelimit.redis.tls.client_cert_file',
  'ratelimit.redis.tls.client_key_file',
  'cache.redis.tls.ca_file',
  'cache.redis.tls.client_cert_file',
  'cache.redis.tls.client_key_file',
  'responses_store.redis.tls.ca_file',
  'responses_store.redis.tls.client_cert_file',
  'responses_store.redis.tls.client_key_file',
  'budgets.redis.tls.ca_file',
  'budgets.redis.tls.client_cert_file',
  'budgets.redis.tls.client_key_file',
  'managed.snapshot_cache_path',
] as const;

function resolvePaths(config: Config, base: string): void {
  const obj = config as unknown as Obj;
  for (const key of PATH_KEYS) {
    const segs = key.split('.');
    const p = getPath(obj, segs);
    // An empty string stays empty: it means "unset" where the schema allows it (etcd.tls).
    if (typeof p === 'string' && p !== '') setPath(obj, segs, resolvePath(base, p));
  }
}

/** Split `host:port` (`[::1]:3000`, `:3000`). Validated by the schema already. */
export function parseAddr(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  let host = addr.slice(0, i);
  if (host.startsWith('[')) host = host.slice(1, -1);
  return { host: host || '0.0.0.0', port: Number(addr.slice(i + 1)) };
}
