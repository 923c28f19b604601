// The file source (docs/configuration.md "resources.yaml"): read whole before any listener binds; SIGHUP
// re-runs the whole pipeline and either swaps the snapshot atomically or keeps every byte of the previous
// one (docs/configuration.md "Reloading"): the bytes are read until two reads `STABLE_MS` apart agree, and
// a collection that served entries before and is absent from the new file is refused as truncated.
import { type RejectedRow, rfc3339 } from '../config-facts.ts';
import { MSG } from '../observability/messages.ts';
import type { FileReader, Platform, Sha256Stream } from '../platform.ts';
import type { ApiKeyIndex } from '../resources/api-key-index.ts';
import { type EntryError, loadResourcesFile, type ParsedOn } from '../resources/pipeline.ts';
import { sha256 } from '@noble/hashes/sha2.js';
import { BULK_SLICE_MS, Pacer, SLICE_MS } from '../resources/pace.ts';
import { concatBytes } from '../util/bytes.ts';
import { hexOf, uuidV5 } from '../util/crypto.ts';
import { sleep } from '../util/sleep.ts';
import { type ConfigSource, deferred, type SourceLoad, type SourceSink } from './source.ts';

/** A reload reads the file until two reads this far apart agree. */
export const STABLE_MS = 150;
/** At most this many reads of a file that keeps changing, then the reload is refused. */
export const MAX_READS = 20;

const LOG = {
  reloading: 'reloading the resources file',
  unsettled: 'resources file changed while being read — waiting for it to settle',
  parsed: 'resources file parsed',
  workerFailed: 'resources file parsed on the event loop: the YAML worker thread failed',
} as const;

/** What the file source needs: the sink it writes to, and the platform's files and environment. */
export interface FileSourceHost extends SourceSink {
  readonly platform: Pick<Platform, 'files' | 'env' | 'parseYamlOffThread' | 'boundHeapGrowth' | 'sha256Stream'>;
}

export interface ReadOptions {
  /**
   * A reload (SIGHUP): read until stable and refuse a file missing a collection that served before.
   * The first load reads once: nothing served before it.
   */
  reload?: boolean;
}

export class FileSource implements ConfigSource {
  readonly firstApplied: Promise<void>;
  private readonly first = deferred();
  /** Kinds accepted and not served that were WARNed about already (once per kind). */
  private readonly warnedKinds = new Set<string>();
  /** The collections of the last applied file and their entry counts. */
  private appliedCollections: Record<string, number> | undefined;
  /** The api keys of the snapshot this source applied last: a reload keeps those of its rows that did not change. */
  private appliedKeys: ApiKeyIndex | undefined;
  /** The reload chain: reloads run one after another, never overlapping. */
  private reloading: Promise<void> = Promise.resolve();

  constructor(readonly path: string, private readonly host: FileSourceHost) {
    this.firstApplied = this.first.promise;
  }

  /** The first load, before anything binds; its success is logged, its failure returned. */
  async load(): Promise<SourceLoad> {
    const r = await this.read();
    if (r.ok) this.host.log.info(MSG.resourcesLoaded, { file: this.path, resources: r.resources });
    return r;
  }

  /** Nothing reads in the background: the file is read by `load` and `reload` only. */
  start(): void {}

  /** SIGHUP: reload all-or-nothing and log the outcome; reloads run one after another. */
  reload(): Promise<void> {
    this.reloading = this.reloading.then(() => this.reloadOnce());
    return this.reloading;
  }

  /** Nothing to interrupt: a reload in flight ends with the process. */
  async stop(): Promise<void> {}

  /** Read the file and apply it all-or-nothing, recording what was observed; logs nothing of the outcome. */
  async read(opts: ReadOptions = {}): Promise<SourceLoad> {
    const { path, host } = this;
    const files = host.platform.files;
    if (!files) return { ok: false, message: `resources file ${path}: this runtime has no file access` };
    const read = await this.readText(files, opts);
    if (!read.ok) return read;
    const { text, size, hash } = read;
    const parseOffThread = host.platform.parseYamlOffThread;
    const large = size >= SLICED_BYTES;
    if (large) host.platform.boundHeapGrowth?.(true);
    const r = await loadResourcesFile(path, text, host.platform.env, {
      ...(parseOffThread ? { parseOffThread: (t: string) => parseOffThread.call(host.platform, t) } : {}),
      onParsed: (where) => this.logParsed(where, size),
      serving: opts.reload === true,
      ...(opts.reload && this.appliedKeys ? { previousKeys: this.appliedKeys } : {}),
    }).finally(() => {
      if (large) host.platform.boundHeapGrowth?.(false);
    });
    if (!r.ok) {
      await this.recordRejected(r.entryErrors);
      return this.fail('validate', r.report.format());
    }
    const missing = opts.reload ? this.missingCollections(r.collections) : [];
    if (missing.length > 0) return this.fail('validate', truncatedMessage(path, missing));
    this.appliedCollections = r.collections;
    this.appliedKeys = r.snapshot.apiKeys;
    host.record.latestLoadFailed(false);
    host.record.rejected([]);
    this.reportNotServed(r.notServed);
    host.apply(r.snapshot, { configHash: hash });
    this.first.resolve();
    return { ok: true, resources: r.resourceCount };
  }

  /**
   * The file's text, its size and digest, recording what was observed. The bytes are read a piece at a time into
   * one buffer, hashed and decoded as they come: nothing holds them whole (at a million api keys they are as
   * large as the text beside them).
   */
  private async readText(
    files: NonNullable<Platform['files']>,
    opts: ReadOptions,
  ): Promise<{ ok: true; text: string | string[]; size: number; hash: string } | { ok: false; message: string }> {
    const { path, host } = this;
    const hasher = (): Sha256Stream => host.platform.sha256Stream?.() ?? sha256.create();
    let read: Read;
    try {
      read = opts.reload
        ? await this.readStable((decode) => readPass(files, path, SERVING, decode, hasher))
        : await readPass(files, path, BULK, true, hasher);
    } catch (e) {
      const message = `resources file ${path}: cannot read it: ${(e as Error).message}`;
      host.record.latestLoadFailed(true);
      host.recordFailure('fetch', message);
      return { ok: false, message };
    }
    const { text, size, hash } = read;
    host.record.observed({ sourceHash: hash, at: this.now() });
    if (typeof text !== 'string' && !Array.isArray(text)) {
      return this.fail('parse', `resources file ${path}: not valid UTF-8`);
    }
    return { ok: true, text, size, hash };
  }

  /** Where the YAML stage ran (DEBUG); a worker that failed and left the parse to the event loop is a WARN. */
  private logParsed(where: ParsedOn, bytes: number): void {
    const { log } = this.host;
    if (where.workerError !== undefined) log.warn(LOG.workerFailed, { file: this.path, error: where.workerError });
    log.debug(LOG.parsed, { file: this.path, bytes, parsed_on: where.on });
  }

  private now(): string {
    return rfc3339(new Date(this.host.clock()));
  }

  private async reloadOnce(): Promise<void> {
    const { log } = this.host;
    log.info(LOG.reloading, { file: this.path });
    const r = await this.read({ reload: true });
    if (r.ok) {
      log.info(MSG.fileReloaded, {
        file: this.path,
        resources: r.resources,
        generation: this.host.facts.applied?.apply_seq,
      });
    } else log.warn(MSG.fileReloadFailed, { file: this.path, error: r.message });
  }

  /**
   * Read until two reads `STABLE_MS` apart agree; throws when the file keeps changing for `MAX_READS` reads. Every
   * read but the first decodes its bytes as it goes: the one that agrees with the last is the text.
   */
  private async readStable(read: (decode: boolean) => Promise<Read>): Promise<Read> {
    // Only the digest of the previous read is kept: two large files' texts are never held at once.
    let prev = (await read(false)).hash;
    for (let i = 1; i < MAX_READS; i++) {
      await sleep(STABLE_MS);
      const next = await read(true);
      if (next.hash === prev) return next;
      if (i === 1) this.host.log.info(LOG.unsettled, { file: this.path });
      prev = next.hash;
    }
    throw new Error(`it was still changing after ${MAX_READS} reads ${STABLE_MS} ms apart`);
  }

  /** The collections that served entries before and are absent (not even `[]`) from the new file. */
  private missingCollections(now: Record<string, number>): [string, number][] {
    const before = this.appliedCollections;
    if (!before) return [];
    return Object.entries(before).filter(([kind, n]) => n > 0 && now[kind] === undefined);
  }

  /** Kinds Sluice accepts and does not serve: reported like the etcd source does (field `*`), WARN once per kind. */
  private reportNotServed(notServed: Record<string, number>): void {
    const kinds = Object.keys(notServed).sort();
    this.host.record.partiallyCompatible(
      kinds.map((k) => ({ resource_kind: k, field: '*', count: notServed[k]! })),
      { ...notServed },
    );
    for (const kind of kinds) {
      if (this.warnedKinds.has(kind)) continue;
      this.warnedKinds.add(kind);
      this.host.log.warn(MSG.kindNotServed, { file: this.path, kind, count: notServed[kind] });
    }
  }

  private fail(kind: 'parse' | 'validate', message: string): { ok: false; message: string } {
    this.host.record.latestLoadFailed(true);
    this.host.recordFailure(kind, message);
    return { ok: false, message };
  }

  /**
   * A failed load lists the rows it could not accept in `rejected[]` (one entry per row, its errors
   * joined), so `/status/config` names them; `first_seen_at` survives repeated failures of the same row.
   */
  private async recordRejected(errors: readonly EntryError[]): Promise<void> {
    const now = this.now();
    const byRow = new Map<string, { kind: string; id: string; errors: string[] }>();
    for (const e of errors) {
      const id = e.identity !== undefined ? uuidV5(`${e.kind}/${e.identity}`) : `${e.kind}[${e.index}]`;
      const key = `${e.kind}/${id}`;
      const row = byRow.get(key) ?? { kind: e.kind, id, errors: [] };
      row.errors.push(e.message);
      byRow.set(key, row);
    }
    const previous = new Map(this.host.facts.rejected.map((r) => [`${r.resource_kind}/${r.resource_id}`, r]));
    this.host.record.rejected([...byRow.entries()].map(([key, r]): RejectedRow => ({
      resource_kind: r.kind,
      resource_id: r.id,
      last_error_kind: 'schema_failed',
      last_error: r.errors.join('; '),
      first_seen_at: previous.get(key)?.first_seen_at ?? now,
      last_seen_at: now,
    })));
  }
}

/** One read of the file. */
interface Read {
  /** SHA-256 (hex) of the bytes: the source hash, and what tells two reads apart. */
  hash: string;
  size: number;
  /** The text, when the read was asked to decode it; `null` when the bytes are not UTF-8. */
  text?: string | string[] | null;
}

/** From this size on, a file's text is handed on as pieces, each ending just after a line break (but the last). */
export const SLICED_BYTES = 8 << 20;
/** How long a slice of hashing runs, and the bytes it takes on at a time. */
interface Slices {
  ms: number;
  bytes: number;
}

/** A first load serves nothing yet: a megabyte at a time, a few milliseconds of work. */
const BULK: Slices = { ms: BULK_SLICE_MS, bytes: 1 << 20 };
/**
 * A reload serves requests meanwhile, each waiting for a slice at every turn of the loop it needs: short slices,
 * as the pipeline's (a megabyte of SHA-256 in JavaScript is a long slice on a busy machine).
 */
const SERVING: Slices = { ms: SLICE_MS, bytes: 64 << 10 };
/**
 * The bytes read, and decoded, at a time: a megabyte is decoded natively and quickly, and a piece that large is
 * allocated outside the young generation, which would copy a smaller one twice.
 */
const PIECE_BYTES = 1 << 20;

/**
 * One pass over the file, a piece at a time into one buffer: its digest and size, and with `decode` its text.
 * Hashed here by `hasher` (the platform's native SHA-256 where it has one), a slice at a time with the loop's turn
 * between, so a large file's hashing never holds the loop; never read whole, since a buffer the size of a large
 * file held Deno's loop as a reload began (docs/performance.md "Configuration at scale").
 */
async function readPass(
  files: NonNullable<Platform['files']>,
  path: string,
  slices: Slices,
  decode: boolean,
  hasher: () => Sha256Stream,
): Promise<Read> {
  const reader = await openReader(files, path);
  const buf = new Uint8Array(PIECE_BYTES);
  const h = hasher();
  const pacer = new Pacer(slices.ms);
  let text: TextPieces | undefined = decode ? new TextPieces() : undefined;
  let size = 0;
  try {
    for (let n; (n = await fill(reader, buf)) > 0;) {
      size += n;
      for (let at = 0; at < n; at += slices.bytes) {
        h.update(buf.subarray(at, Math.min(n, at + slices.bytes)));
        await pacer.pace();
      }
      if (text === undefined) continue;
      try {
        text.add(buf.subarray(0, n));
      } catch {
        // Not UTF-8 (decode asked, no text left): the digest is still wanted (what was observed), the text no longer.
        text = undefined;
      }
      await pacer.pace();
    }
  } finally {
    await reader.close();
  }
  const hash = hexOf(h.digest());
  if (!decode) return { hash, size };
  if (text === undefined) return { hash, size, text: null };
  try {
    return { hash, size, text: text.end(size < SLICED_BYTES) };
  } catch {
    return { hash, size, text: null };
  }
}

/** `into` filled from `reader` (less only at the file's end): how many bytes. */
async function fill(reader: FileReader, into: Uint8Array): Promise<number> {
  let n = 0;
  while (n < into.length) {
    const got = await reader.read(into.subarray(n));
    if (got === 0) break;
    n += got;
  }
  return n;
}

/** The platform's reader, or one over the whole file where the platform can only read it whole. */
async function openReader(files: NonNullable<Platform['files']>, path: string): Promise<FileReader> {
  if (files.openRead) return files.openRead(path);
  let bytes: Uint8Array | undefined = await files.read(path);
  let at = 0;
  return {
    read: (into) => {
      const piece = bytes!.subarray(at, at + into.length);
      into.set(piece);
      at += piece.length;
      return Promise.resolve(piece.length);
    },
    close: () => {
      bytes = undefined;
      return Promise.resolve();
    },
  };
}

/**
 * UTF-8 bytes decoded (throwing on a malformed sequence) into pieces that each end just after a line break (but
 * the last): joining a large file's would hold the loop for hundreds of milliseconds. Not in `TextDecoder`'s
 * streaming mode: on Node that mode hands back a large piece as an external two-byte string, outside the heap,
 * where V8 counts it toward its next full collection (docs/performance.md "Configuration at scale"). Each piece
 * is cut at its last line break instead, which no UTF-8 character contains, so every decode is of whole
 * characters.
 */
export class TextPieces {
  /** The file's first bytes may open with a byte order mark, dropped as the streaming decoder did. */
  private readonly first = new TextDecoder('utf-8', { fatal: true });
  private readonly rest = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  private readonly pieces: string[] = [];
  /** The bytes read since the last line break (copies: the reader reuses its buffer). */
  private held: Uint8Array[] = [];

  add(bytes: Uint8Array): void {
    const last = bytes.lastIndexOf(0x0a) + 1;
    if (last === 0) {
      this.held.push(bytes.slice());
      return;
    }
    // The line the held bytes began is a piece of its own: the rest is decoded from the reader's buffer, uncopied.
    const from = this.held.length === 0 ? 0 : bytes.indexOf(0x0a) + 1;
    if (from > 0) this.push(concatBytes(...this.held, bytes.subarray(0, from)));
    if (from < last) this.push(bytes.subarray(from, last));
    this.held = last < bytes.length ? [bytes.slice(last)] : [];
  }

  /** The text: one string (`whole`), or its pieces. */
  end(whole: boolean): string | string[] {
    if (this.held.length > 0) this.push(concatBytes(...this.held));
    this.held = [];
    return whole ? this.pieces.join('') : this.pieces;
  }

  private push(bytes: Uint8Array): void {
    const text = (this.pieces.length === 0 ? this.first : this.rest).decode(bytes);
    if (text.length > 0) this.pieces.push(text);
  }
}

function truncatedMessage(path: string, missing: [string, number][]): string {
  const named = missing.map(([kind, n]) => `\`${kind}\` (${n} served)`).join(', ');
  const empty = missing.map(([kind]) => `\`${kind}: []\``).join(', ');
  return `resources file ${path}: ${named} absent from the new file — refused as truncated or half-written; ` +
    `to remove every entry of a collection on purpose, write it as an empty list: ${empty}`;
}
