// The file source (docs/configuration.md): loaded before any listener binds; SIGHUP re-runs the whole pipeline and
// either swaps the snapshot atomically or keeps every byte of the previous one.
//
// A reload cannot half-apply (docs/configuration.md "Reloading"): the bytes are read until two reads
// `STABLE_MS` apart agree (a file being written is waited for, within `MAX_READS`), and a collection that
// served entries before and is absent from the new file is refused as a truncated file — removing a whole
// collection on purpose is written as an explicit empty list (`api_keys: []`).
import type { Gateway } from '../gateway.ts';
import { MSG } from '../observability/messages.ts';
import { loadResourcesFile } from '../resources/pipeline.ts';
import { type RejectedRow, rfc3339 } from '../config-facts.ts';
import { sha256Hex, uuidV5 } from '../util/crypto.ts';
import { sleep } from '../util/sleep.ts';

const decoder = new TextDecoder('utf-8', { fatal: true });

const warnedKinds = new WeakMap<Gateway, Set<string>>();
/** Per gateway: the collections of the last applied file and their entry counts. */
const appliedCollections = new WeakMap<Gateway, Record<string, number>>();

/** A reload reads the file until two reads this far apart agree. */
export const STABLE_MS = 150;
/** At most this many reads (about 3 s of a file that keeps changing), then the reload is refused. */
export const MAX_READS = 20;

const LOG = {
  reloading: 'reloading the resources file',
  unsettled: 'resources file changed while being read — waiting for it to settle',
} as const;

export type FileLoad = { ok: true; resources: number } | { ok: false; message: string };

export interface LoadOptions {
  /**
   * A reload (SIGHUP): read until stable and refuse a file missing a collection that served before.
   * The first load reads once: nothing served before it.
   */
  reload?: boolean;
}

/** Read until two reads `STABLE_MS` apart agree; throws when the file keeps changing for `MAX_READS` reads. */
async function readStable(gw: Gateway, read: () => Promise<Uint8Array>, path: string): Promise<Uint8Array> {
  let prev = await read();
  for (let i = 1; i < MAX_READS; i++) {
    await sleep(STABLE_MS);
    const next = await read();
    if (sameBytes(prev, next)) return next;
    if (i === 1) gw.log.info(LOG.unsettled, { file: path });
    prev = next;
  }
  throw new Error(`it was still changing after ${MAX_READS} reads ${STABLE_MS} ms apart`);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The collections that served entries before and are absent (not even `[]`) from the new file. */
function missingCollections(gw: Gateway, now: Record<string, number>): [string, number][] {
  const before = appliedCollections.get(gw);
  if (!before) return [];
  return Object.entries(before).filter(([kind, n]) => n > 0 && now[kind] === undefined);
}

export async function loadFromFile(gw: Gateway, path: string, opts: LoadOptions = {}): Promise<FileLoad> {
  const files = gw.platform.files;
  if (!files) return { ok: false, message: `resources file ${path}: this runtime has no file access` };
  let bytes: Uint8Array;
  try {
    bytes = opts.reload ? await readStable(gw, () => files.read(path), path) : await files.read(path);
  } catch (e) {
    const message = `resources file ${path}: cannot read it: ${(e as Error).message}`;
    gw.record.latestLoadFailed(true);
    gw.recordFailure('fetch', message);
    return { ok: false, message };
  }
  const hash = await sha256Hex(bytes);
  gw.record.observed({ sourceHash: hash, at: rfc3339(gw.now()) });
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    return fail(gw, 'parse', `resources file ${path}: not valid UTF-8`);
  }
  const r = await loadResourcesFile(path, text, gw.platform.env);
  if (!r.ok) {
    await recordRejected(gw, r.report.entries.map((e) => ({ scope: e.scope, message: e.message })));
    return fail(gw, 'validate', r.report.format());
  }
  const missing = opts.reload ? missingCollections(gw, r.collections) : [];
  if (missing.length > 0) {
    const named = missing.map(([kind, n]) => `\`${kind}\` (${n} served)`).join(', ');
    const empty = missing.map(([kind]) => `\`${kind}: []\``).join(', ');
    return fail(
      gw,
      'validate',
      `resources file ${path}: ${named} absent from the new file — refused as truncated or half-written; ` +
        `to remove every entry of a collection on purpose, write it as an empty list: ${empty}`,
    );
  }
  appliedCollections.set(gw, r.collections);
  gw.record.latestLoadFailed(false);
  gw.record.rejected([]);
  // Kinds Sluice accepts and does not serve: reported like the etcd source does (field `*`), WARN once per kind.
  const kinds = Object.keys(r.notServed).sort();
  gw.record.partiallyCompatible(
    kinds.map((k) => ({ resource_kind: k, field: '*', count: r.notServed[k]! })),
    { ...r.notServed },
  );
  const warned = warnedKinds.get(gw) ?? new Set<string>();
  warnedKinds.set(gw, warned);
  for (const kind of kinds) {
    if (warned.has(kind)) continue;
    warned.add(kind);
    gw.log.warn(MSG.kindNotServed, { file: path, kind, count: r.notServed[kind] });
  }
  gw.apply(r.snapshot, { configHash: hash });
  return { ok: true, resources: r.resourceCount };
}

function fail(gw: Gateway, kind: 'parse' | 'validate', message: string): FileLoad {
  gw.record.latestLoadFailed(true);
  gw.recordFailure(kind, message);
  return { ok: false, message };
}

const reloading = new WeakMap<Gateway, Promise<void>>();

/** SIGHUP: reload all-or-nothing and log the outcome; reloads run one after another, never overlapping. */
export function reloadFile(gw: Gateway, path: string): Promise<void> {
  const next = (reloading.get(gw) ?? Promise.resolve()).then(() => reloadOnce(gw, path));
  reloading.set(gw, next);
  return next;
}

async function reloadOnce(gw: Gateway, path: string): Promise<void> {
  gw.log.info(LOG.reloading, { file: path });
  const r = await loadFromFile(gw, path, { reload: true });
  if (r.ok) {
    gw.log.info(MSG.fileReloaded, { file: path, resources: r.resources, generation: gw.facts.applied?.apply_seq });
  } else gw.log.warn(MSG.fileReloadFailed, { file: path, error: r.message });
}

const ROW_SCOPE = /^([a-z_]+)\[(\d+)\](?: \((".*")\))?$/;

/**
 * A failed file load lists the rows it could not accept in `rejected[]` (one entry per row, its errors
 * joined), so `/status/config` names them; `first_seen_at` survives repeated failures of the same row.
 */
async function recordRejected(gw: Gateway, entries: { scope: string; message: string }[]): Promise<void> {
  const now = rfc3339(gw.now());
  const byRow = new Map<string, { kind: string; id: string; errors: string[] }>();
  for (const e of entries) {
    const m = ROW_SCOPE.exec(e.scope);
    if (!m) continue;
    const identity = m[3] !== undefined ? (JSON.parse(m[3]) as string) : undefined;
    const id = identity !== undefined ? await uuidV5(`${m[1]}/${identity}`) : `${m[1]}[${m[2]}]`;
    const key = `${m[1]}/${id}`;
    const row = byRow.get(key) ?? { kind: m[1]!, id, errors: [] };
    row.errors.push(e.message);
    byRow.set(key, row);
  }
  const previous = new Map(gw.facts.rejected.map((r) => [`${r.resource_kind}/${r.resource_id}`, r]));
  gw.record.rejected([...byRow.entries()].map(([key, r]): RejectedRow => ({
    resource_kind: r.kind,
    resource_id: r.id,
    last_error_kind: 'schema_failed',
    last_error: r.errors.join('; '),
    first_seen_at: previous.get(key)?.first_seen_at ?? now,
    last_seen_at: now,
  })));
}
