// The snapshot cache file (docs/etcd.md "The snapshot cache"): what the gateway serves, so a restart while
// etcd is unreachable binds the proxy at once. Written after every apply by the platform's atomic write,
// serialised and coalesced; read once at boot and trusted only when its format, version, prefix and
// recomputed `config_hash` agree (anything else: a WARN naming the path and the reason). It holds provider
// keys as stored, so the platform writes it with mode 0600; without file access there is no cache.
import type { Logger } from '../observability/logger.ts';
import { MSG } from '../observability/messages.ts';
import type { PlatformFiles } from '../platform.ts';
import type { RejectedRow } from '../config-facts.ts';

export const CACHE_FORMAT = 'sluice-etcd-snapshot-cache' as const;
export const CACHE_VERSION = 1 as const;

/** A last-known-good pin: the key serves its cached row while its current value is rejected. */
export type CachedPin = Omit<RejectedRow, 'serving_stale_since'> & { since: string };

export interface CacheDocument {
  format: typeof CACHE_FORMAT;
  version: typeof CACHE_VERSION;
  /** The etcd prefix the rows were read under (normalised, no trailing slash). */
  prefix: string;
  /** etcd revision of the configuration served when written. */
  revision: number;
  written_at: string;
  /** docs/etcd.md `config_hash` of `rows`; recomputed on restore. */
  config_hash: string;
  /** key → the served value as canonical JSON (pinned keys hold their last-known-good value). */
  rows: Record<string, string>;
  pins: Record<string, CachedPin>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export type CacheHeader = Omit<CacheDocument, 'rows'>;

/**
 * Serialises a cache document. `rows` yields `[key, JSON text of the value string]`: the caller
 * memoises each row's JSON text, so a write of a large prefix does not re-escape the unchanged rows.
 */
export function encodeCache(header: CacheHeader, rows: Iterable<[string, string]>): Uint8Array {
  const parts: string[] = [];
  for (const [key, json] of rows) parts.push(`${JSON.stringify(key)}:${json}`);
  const head = JSON.stringify(header);
  return encoder.encode(`${head.slice(0, -1)},"rows":{${parts.join(',')}}}`);
}

/** Parses and checks a cache file's bytes. Returns the document or why it cannot be used. Pure. */
export function decodeCache(
  bytes: Uint8Array,
  prefix: string,
): { ok: true; doc: CacheDocument } | { ok: false; reason: string } {
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(bytes));
  } catch {
    return { ok: false, reason: 'corrupt: not a JSON document' };
  }
  if (!isRecord(value) || value.format !== CACHE_FORMAT) {
    return { ok: false, reason: `corrupt: not a Sluice snapshot cache (format is not "${CACHE_FORMAT}")` };
  }
  if (value.version !== CACHE_VERSION) {
    return {
      ok: false,
      reason: `unknown version ${JSON.stringify(value.version)} (this Sluice reads version ${CACHE_VERSION})`,
    };
  }
  if (typeof value.prefix !== 'string') return { ok: false, reason: 'corrupt: no prefix' };
  if (value.prefix !== prefix) {
    return { ok: false, reason: `foreign: written for etcd prefix "${value.prefix}", this gateway reads "${prefix}"` };
  }
  if (!Number.isSafeInteger(value.revision) || (value.revision as number) < 0) {
    return { ok: false, reason: 'corrupt: bad revision' };
  }
  if (typeof value.config_hash !== 'string' || !/^[0-9a-f]{64}$/.test(value.config_hash)) {
    return { ok: false, reason: 'corrupt: bad config_hash' };
  }
  if (typeof value.written_at !== 'string') return { ok: false, reason: 'corrupt: bad written_at' };
  const rows = value.rows;
  if (!isRecord(rows)) return { ok: false, reason: 'corrupt: no rows' };
  for (const [k, v] of Object.entries(rows)) {
    if (typeof v !== 'string' || !k.startsWith(`${prefix}/`)) return { ok: false, reason: 'corrupt: bad row' };
  }
  const pins = value.pins;
  if (!isRecord(pins)) return { ok: false, reason: 'corrupt: no pins' };
  for (const [k, p] of Object.entries(pins)) {
    if (!(k in rows) || !isRecord(p)) return { ok: false, reason: 'corrupt: a pin without its row' };
    for (
      const f of [
        'since',
        'resource_kind',
        'resource_id',
        'last_error_kind',
        'last_error',
        'first_seen_at',
        'last_seen_at',
      ]
    ) {
      if (typeof p[f] !== 'string') return { ok: false, reason: `corrupt: pin without ${f}` };
    }
  }
  return { ok: true, doc: value as unknown as CacheDocument };
}

function isMissingFile(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  const name = (e as { name?: unknown } | null)?.name;
  return code === 'ENOENT' || name === 'NotFound' ||
    /ENOENT|no such file|not found/i.test(String((e as Error)?.message ?? e));
}

/** How long a write waits for more applies to coalesce with (a watch burst arrives as many batches). */
const COALESCE_MS = 50;

/** Where each write's outcome goes (the gateway's config facts: `/status/config` and a metric). */
export interface CacheWriteReport {
  written(path: string): void;
  writeFailed(path: string, error: string): void;
}

export class SnapshotCache {
  private pending: (() => Uint8Array | undefined) | undefined;
  private writing: Promise<void> | undefined;

  constructor(
    private readonly files: PlatformFiles,
    readonly path: string,
    private readonly log: Logger,
    private readonly report?: CacheWriteReport,
  ) {}

  /** The platform's files and the configured path, or undefined when there is no cache. */
  static open(
    files: PlatformFiles | undefined,
    path: string | undefined,
    log: Logger,
    report?: CacheWriteReport,
  ): SnapshotCache | undefined {
    return files && path ? new SnapshotCache(files, path, log, report) : undefined;
  }

  /**
   * The cached document, or undefined (no file yet, or unusable: WARN with path and reason). `verify`
   * recomputes what the document claims (rows valid, config_hash) and returns a reason when it does not hold.
   */
  async read(
    prefix: string,
    verify: (doc: CacheDocument) => Promise<string | undefined>,
  ): Promise<CacheDocument | undefined> {
    let bytes: Uint8Array;
    try {
      bytes = await this.files.read(this.path);
    } catch (e) {
      if (!isMissingFile(e)) {
        this.log.warn(MSG.cacheIgnored, { path: this.path, reason: `cannot read it: ${(e as Error).message}` });
      }
      return undefined;
    }
    const r = decodeCache(bytes, prefix);
    const reason = r.ok ? await verify(r.doc) : r.reason;
    if (reason !== undefined || !r.ok) {
      this.log.warn(MSG.cacheIgnored, { path: this.path, reason: reason ?? 'unusable' });
      return undefined;
    }
    return r.doc;
  }

  /**
   * Write the latest state soon: `produce` (the encoded document, see `encodeCache`) is called when the
   * write starts, so a burst of applies while a write waits or runs costs one more write. `produce` returns
   * undefined when what serves is between two applies: the next apply schedules the write again.
   */
  schedule(produce: () => Uint8Array | undefined): void {
    this.pending = produce;
    this.writing ??= this.drain();
  }

  /** Resolves once every scheduled write has finished (shutdown, tests). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async drain(): Promise<void> {
    try {
      await new Promise((r) => setTimeout(r, COALESCE_MS));
      while (this.pending) {
        const produce = this.pending;
        this.pending = undefined;
        const bytes = produce();
        if (bytes === undefined) continue;
        try {
          await this.files.writeAtomic(this.path, bytes);
          this.report?.written(this.path);
        } catch (e) {
          this.log.warn(MSG.cacheWriteFailed, { path: this.path, error: (e as Error).message });
          this.report?.writeFailed(this.path, (e as Error).message);
        }
      }
    } finally {
      this.writing = undefined;
    }
  }
}
