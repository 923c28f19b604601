// The snapshot cache file (docs/etcd.md "The snapshot cache"): what the gateway serves, so a restart while
// etcd is unreachable binds the proxy at once. Written after every apply by the platform's atomic write,
// serialised and coalesced, a large document encoded in slices and rewritten at a bounded rate
// (docs/performance.md "Configuration at scale"); read once at boot and trusted only when its format, version,
// prefix and recomputed `config_hash` agree (anything else: a WARN naming the path and the reason). It holds
// provider keys as stored, so the platform writes it with mode 0600; without file access there is no cache.
import type { Logger } from '../observability/logger.ts';
import { MSG } from '../observability/messages.ts';
import type { PlatformFiles } from '../platform.ts';
import { paceSteps, runSteps } from '../util/steps.ts';
import type { RejectedRow } from '../config-facts.ts';

export const CACHE_FORMAT = 'sluice-etcd-snapshot-cache' as const;
export const CACHE_VERSION = 1 as const;

/** A last-known-good pin: the key serves its cached row while its current value is rejected. */
export type CachedPin = Omit<RejectedRow, 'serving_stale_since'> & { since: string };

/** The document's members; its rows (`"rows": { key: value JSON }`) follow them, last. */
export interface CacheHeader {
  format: typeof CACHE_FORMAT;
  version: typeof CACHE_VERSION;
  /** The etcd prefix the rows were read under (normalised, no trailing slash). */
  prefix: string;
  /** etcd revision of the configuration served when written. */
  revision: number;
  written_at: string;
  /** docs/etcd.md `config_hash` of the rows; recomputed on restore. */
  config_hash: string;
  pins: Record<string, CachedPin>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Text gathered before it is encoded: small enough that its strings die young, large enough that a call is cheap. */
const PIECE_CHARS = 1 << 16;

/** The first block of bytes; each next one is twice the last, up to `MAX_BLOCK` (few allocations, little waste). */
const FIRST_BLOCK = 1 << 16;
const MAX_BLOCK = 1 << 23;

/**
 * A cache document's bytes a row at a time: the header, then `"key":"value"` per row, encoded a piece of text at
 * a time into blocks (a row's text is never split, so the blocks are the encoding of the whole text).
 */
class CacheBytes {
  private readonly blocks: Uint8Array[] = [];
  private block: Uint8Array = new Uint8Array(FIRST_BLOCK);
  private used = 0;
  private text: string[];
  private chars = 0;
  private first = true;

  /** `sizeHint`: about how many bytes the document will have (the last one's size): one block of that. */
  constructor(header: CacheHeader, sizeHint = 0) {
    const head = JSON.stringify(header);
    this.text = [`${head.slice(0, -1)},"rows":{`];
    if (sizeHint > FIRST_BLOCK) this.block = new Uint8Array(sizeHint + (sizeHint >>> 4));
  }

  /** `json`: the JSON text of the row's value string. */
  row(key: string, json: string): void {
    const t = `${this.first ? '' : ','}${JSON.stringify(key)}:${json}`;
    this.first = false;
    this.text.push(t);
    this.chars += t.length;
    if (this.chars >= PIECE_CHARS) this.cut();
  }

  /** The document's bytes, block by block. */
  end(): Uint8Array[] {
    this.text.push('}}');
    this.cut();
    this.blocks.push(this.block.subarray(0, this.used));
    return this.blocks;
  }

  private cut(): void {
    const piece = this.text.join('');
    this.text = [];
    this.chars = 0;
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    if (this.block.length - this.used < 3 * piece.length) {
      this.blocks.push(this.block.subarray(0, this.used));
      this.block = new Uint8Array(Math.max(Math.min(2 * this.block.length, MAX_BLOCK), 3 * piece.length));
      this.used = 0;
    }
    this.used += encoder.encodeInto(piece, this.block.subarray(this.used)).written;
  }
}

/**
 * Copies the blocks into one array, yielding after each block (the async caller paces there); each block is
 * dropped once copied, so the document is not held twice over.
 */
function* joinBlocks(blocks: Uint8Array[]): Generator<void, Uint8Array> {
  if (blocks.length === 1) return blocks[0]!;
  let size = 0;
  for (const b of blocks) size += b.length;
  const out = new Uint8Array(size);
  let at = 0;
  for (let i = 0; i < blocks.length; i++) {
    out.set(blocks[i]!, at);
    at += blocks[i]!.length;
    blocks[i] = EMPTY;
    yield;
  }
  return out;
}

const EMPTY = new Uint8Array(0);

/** Serialises a cache document. `rows` yields `[key, JSON text of the value string]`. */
export function encodeCache(header: CacheHeader, rows: Iterable<[string, string]>): Uint8Array {
  const bytes = new CacheBytes(header);
  for (const [key, json] of rows) bytes.row(key, json);
  return runSteps(joinBlocks(bytes.end()));
}

/**
 * The bytes of `encodeCache`, with `pace()` awaited between rows and pieces: a document of a million rows is
 * hundreds of megabytes, and made at once it would hold the event loop (and every request) for seconds.
 * `sizeHint`: the size of the last document, so that the bytes are one allocation, not blocks and their copy
 * (each allocation of that size asks the collector for a full collection of the heap).
 */
export async function encodeCacheSliced(
  header: CacheHeader,
  rows: Iterable<[string, string]>,
  pace: () => Promise<void> | undefined,
  sizeHint = 0,
): Promise<Uint8Array> {
  const bytes = new CacheBytes(header, sizeHint);
  for (const [key, json] of rows) {
    bytes.row(key, json);
    const p = pace();
    if (p) await p;
  }
  return await paceSteps(joinBlocks(bytes.end()), pace);
}

/** A cache document found malformed while its rows are taken: the message is the WARN's reason. */
export class CacheCorrupt extends Error {}

/** What `decodeCache` returns: the document's header, checked, and its rows, parsed as they are taken. */
export interface CacheDocument extends CacheHeader {
  /**
   * `[key, the served value's JSON text]` in the document's order, each key under the prefix; to be taken once.
   * Throws `CacheCorrupt` where the document turns out not to be one (a bad row, a pin without its row).
   */
  rows: Iterable<[string, string]>;
}

type Decoded = { ok: true; doc: CacheDocument } | { ok: false; reason: string };

/** Where a document as `CacheBytes` writes it opens its rows (a `"` inside a JSON string is escaped). */
const ROWS_OPEN = encoder.encode(',"rows":{');

/**
 * Parses and checks a cache file's header; its rows are parsed as they are taken (`rows`), a piece of the bytes
 * at a time, so a document of a million rows is never one string nor one object and its reader can yield
 * between rows. A document laid out otherwise (rows before the pins) is parsed whole.
 */
export function decodeCache(bytes: Uint8Array, prefix: string): Decoded {
  const open = rowsOpen(bytes);
  let head: unknown;
  try {
    head = open < 0 ? undefined : JSON.parse(`${decoder.decode(bytes.subarray(0, open))}}`);
  } catch {
    head = undefined;
  }
  if (!isRecord(head) || !isRecord(head.pins)) return decodeWhole(bytes, prefix);
  const reason = headerProblem(head, prefix);
  if (reason !== undefined) return { ok: false, reason };
  const doc = head as unknown as CacheDocument;
  doc.rows = rowsAt(bytes, open + ROWS_OPEN.length, prefix, Object.keys(doc.pins));
  return { ok: true, doc };
}

function rowsOpen(bytes: Uint8Array): number {
  for (let i = bytes.indexOf(0x2c); i >= 0; i = bytes.indexOf(0x2c, i + 1)) {
    let j = 1;
    while (j < ROWS_OPEN.length && bytes[i + j] === ROWS_OPEN[j]) j++;
    if (j === ROWS_OPEN.length) return i;
  }
  return -1;
}

/** The whole document in one parse: any layout JSON allows. */
function decodeWhole(bytes: Uint8Array, prefix: string): Decoded {
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(bytes));
  } catch {
    return { ok: false, reason: NOT_JSON };
  }
  const reason = headerProblem(value, prefix);
  if (reason !== undefined) return { ok: false, reason };
  const doc = value as Record<string, unknown>;
  const rows = doc.rows;
  if (!isRecord(rows)) return { ok: false, reason: 'corrupt: no rows' };
  for (const [k, v] of Object.entries(rows)) {
    if (typeof v !== 'string' || !k.startsWith(`${prefix}/`)) return { ok: false, reason: BAD_ROW };
  }
  for (const k of Object.keys(doc.pins as object)) {
    if (!(k in rows)) return { ok: false, reason: PIN_WITHOUT_ROW };
  }
  doc.rows = Object.entries(rows);
  return { ok: true, doc: doc as unknown as CacheDocument };
}

const NOT_JSON = 'corrupt: not a JSON document';
const BAD_ROW = 'corrupt: bad row';
const PIN_WITHOUT_ROW = 'corrupt: a pin without its row';
const PIN_FIELDS = [
  'since',
  'resource_kind',
  'resource_id',
  'last_error_kind',
  'last_error',
  'first_seen_at',
  'last_seen_at',
];

/** Why a document's members other than its rows make it unusable, or undefined. */
function headerProblem(value: unknown, prefix: string): string | undefined {
  if (!isRecord(value) || value.format !== CACHE_FORMAT) {
    return `corrupt: not a Sluice snapshot cache (format is not "${CACHE_FORMAT}")`;
  }
  if (value.version !== CACHE_VERSION) {
    return `unknown version ${JSON.stringify(value.version)} (this Sluice reads version ${CACHE_VERSION})`;
  }
  if (typeof value.prefix !== 'string') return 'corrupt: no prefix';
  if (value.prefix !== prefix) {
    return `foreign: written for etcd prefix "${value.prefix}", this gateway reads "${prefix}"`;
  }
  if (!Number.isSafeInteger(value.revision) || (value.revision as number) < 0) return 'corrupt: bad revision';
  if (typeof value.config_hash !== 'string' || !/^[0-9a-f]{64}$/.test(value.config_hash)) {
    return 'corrupt: bad config_hash';
  }
  if (typeof value.written_at !== 'string') return 'corrupt: bad written_at';
  const pins = value.pins;
  if (!isRecord(pins)) return 'corrupt: no pins';
  for (const p of Object.values(pins)) {
    if (!isRecord(p)) return PIN_WITHOUT_ROW;
    for (const f of PIN_FIELDS) if (typeof p[f] !== 'string') return `corrupt: pin without ${f}`;
  }
  return undefined;
}

/** The bytes decoded per piece of the rows. */
const ROW_PIECE_BYTES = 1 << 16;

/**
 * The rows of a document from byte `at` (just inside its `"rows":{`): `"key":"value"` pairs, then the
 * document's end. A piece of the bytes is decoded when the text in hand holds no whole row.
 */
function* rowsAt(bytes: Uint8Array, at: number, prefix: string, pins: string[]): Generator<[string, string]> {
  const pinned = new Set(pins);
  let text = '';
  let p = 0;
  let next = at;
  /** More text, keeping what is not taken yet; false at the end of the bytes. */
  const more = (): boolean => {
    if (next >= bytes.length) return false;
    let end = Math.min(bytes.length, next + ROW_PIECE_BYTES);
    while (end < bytes.length && (bytes[end]! & 0xc0) === 0x80) end++; // a piece ends between characters
    let piece: string;
    try {
      piece = decoder.decode(bytes.subarray(next, end));
    } catch {
      throw new CacheCorrupt(NOT_JSON);
    }
    text = text.slice(p) + piece;
    p = 0;
    next = end;
    return true;
  };
  /** The next character that is not JSON whitespace (`p` moved to it), reading more as needed. */
  const token = (): string => {
    for (;;) {
      while (p < text.length && isSpace(text.charCodeAt(p))) p++;
      if (p < text.length) return text[p]!;
      if (!more()) throw new CacheCorrupt(NOT_JSON);
    }
  };
  /** The JSON string that starts at `p`. */
  const string = (): string => {
    if (token() !== '"') throw new CacheCorrupt(BAD_ROW);
    let q = p + 1;
    for (;;) {
      q = text.indexOf('"', q);
      if (q < 0) {
        q = text.length - p; // where the search goes on once `more` has cut the text at `p`
        if (!more()) throw new CacheCorrupt(NOT_JSON);
        continue;
      }
      let escapes = 0;
      while (text.charCodeAt(q - 1 - escapes) === 0x5c) escapes++;
      if (escapes % 2 === 0) break;
      q++;
    }
    let s: string;
    try {
      s = JSON.parse(text.slice(p, q + 1)) as string;
    } catch {
      throw new CacheCorrupt(NOT_JSON);
    }
    p = q + 1;
    return s;
  };
  const expect = (c: string): void => {
    if (token() !== c) throw new CacheCorrupt(NOT_JSON);
    p++;
  };
  if (token() !== '}') {
    for (;;) {
      const key = string();
      expect(':');
      const value = string();
      if (!key.startsWith(`${prefix}/`)) throw new CacheCorrupt(BAD_ROW);
      pinned.delete(key);
      yield [key, value];
      if (token() === '}') break;
      expect(',');
    }
  }
  p++;
  // The document's other members, after its rows: valid JSON, not read.
  if (token() === ',') {
    while (more());
    let tail: unknown;
    try {
      tail = JSON.parse(`{${text.slice(p + 1)}`);
    } catch {
      throw new CacheCorrupt(NOT_JSON);
    }
    if (!isRecord(tail)) throw new CacheCorrupt(NOT_JSON);
  } else {
    expect('}');
    while (p < text.length || more()) {
      if (!isSpace(text.charCodeAt(p))) throw new CacheCorrupt(NOT_JSON);
      p++;
    }
  }
  if (pinned.size > 0) throw new CacheCorrupt(PIN_WITHOUT_ROW);
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function isMissingFile(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  const name = (e as { name?: unknown } | null)?.name;
  return code === 'ENOENT' || name === 'NotFound' ||
    /ENOENT|no such file|not found/i.test(String((e as Error)?.message ?? e));
}

/** How long a write waits for more applies to coalesce with (a watch burst arrives as many batches). */
const COALESCE_MS = 50;

/**
 * The next write starts no sooner than this many times the last one's duration after it ended: a steady stream
 * of changes spends at most about a fifth of the time rewriting a large document, and a small one still follows
 * every burst within `COALESCE_MS`.
 */
const GAP_PER_WRITE_MS = 4;

/** The longest the cache lags behind what serves because of that rule (a restart from it is that much older). */
const MAX_GAP_MS = 60_000;

/** What `schedule` takes: the document's bytes, or undefined between two applies (see `schedule`). */
export type CacheProducer = () => Promise<Uint8Array | undefined> | Uint8Array | undefined;

/** Where each write's outcome goes (the gateway's config facts: `/status/config` and a metric). */
export interface CacheWriteReport {
  written(path: string): void;
  writeFailed(path: string, error: string): void;
}

export class SnapshotCache {
  private pending: CacheProducer | undefined;
  private writing: Promise<void> | undefined;
  /** When the last write ended (performance.now()) and the wait it asks of the next one. */
  private lastEnd = -Infinity;
  private gap = 0;
  /** While a flush runs: every wait ends at once (shutdown writes the latest state now). */
  private flushing = 0;
  private wake: (() => void) | undefined;

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
   * The cached document, or undefined (no file yet, or unusable: WARN with path and reason). `verify` takes
   * the rows (once) and recomputes what the document claims (rows valid, config_hash); it returns a reason when
   * that does not hold. The document it is given is returned, its rows taken.
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
    let reason: string | undefined;
    try {
      reason = r.ok ? await verify(r.doc) : r.reason;
    } catch (e) {
      if (!(e instanceof CacheCorrupt)) throw e;
      reason = e.message;
    }
    if (reason !== undefined || !r.ok) {
      this.log.warn(MSG.cacheIgnored, { path: this.path, reason: reason ?? 'unusable' });
      return undefined;
    }
    return r.doc;
  }

  /**
   * Write the latest state soon: `produce` (the encoded document, see `encodeCache`) is called when the
   * write starts, so a burst of applies while a write waits or runs costs one more write. `produce` returns
   * undefined when what serves is between two applies: the next apply schedules the write again. A write
   * starts `COALESCE_MS` after it is scheduled at the soonest, and `GAP_PER_WRITE_MS` times the last write's
   * duration after that one ended.
   */
  schedule(produce: CacheProducer): void {
    this.pending = produce;
    this.writing ??= this.drain();
  }

  /** Resolves once every scheduled write has finished, none of them waiting (shutdown, tests). */
  async flush(): Promise<void> {
    this.flushing++;
    this.wake?.();
    try {
      while (this.writing) await this.writing;
    } finally {
      this.flushing--;
    }
  }

  private async drain(): Promise<void> {
    try {
      await this.wait(COALESCE_MS);
      while (this.pending) {
        await this.wait(this.lastEnd + this.gap - performance.now());
        const produce = this.pending;
        this.pending = undefined;
        const started = performance.now();
        const bytes = await produce();
        if (bytes === undefined) continue;
        try {
          await this.files.writeAtomic(this.path, bytes);
          this.report?.written(this.path);
        } catch (e) {
          this.log.warn(MSG.cacheWriteFailed, { path: this.path, error: (e as Error).message });
          this.report?.writeFailed(this.path, (e as Error).message);
        }
        this.lastEnd = performance.now();
        this.gap = Math.min(MAX_GAP_MS, GAP_PER_WRITE_MS * (this.lastEnd - started));
      }
    } finally {
      this.writing = undefined;
    }
  }

  /** `ms` (none when not positive), or until a flush begins. */
  private async wait(ms: number): Promise<void> {
    if (ms <= 0 || this.flushing > 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
    this.wake = undefined;
  }
}
