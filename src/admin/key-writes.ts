// What the admin write API does to an api key row (docs/admin.md "Keys"): issue (the plaintext returned once,
// only its SHA-256 stored as AISIX's `key_hash`), change its allowed models, limits and budgets, rotate (the
// replaced hash stays valid for a grace period in `previous_key_hashes`), revoke, delete. Each is a
// read-compute-write against one revision, retried when another write got there first.
import { z } from 'zod';
import { ProxyError } from '../http/errors.ts';
import { apiKeyShape } from '../resources/schema.ts';
import { base64Encode } from '../util/bytes.ts';
import { sha256Hex } from '../util/crypto.ts';
import type { RowStore, StoredRow } from './etcd-rows.ts';

/** The members a write may set; `key_hash` and `previous_key_hashes` are the server's (issue, rotate). */
export const EDITABLE = [
  'display_name',
  'allowed_models',
  'expires_at',
  'disabled',
  'rate_limit',
  'team_id',
  'user_id',
  'user_name',
  'budgets',
  'allowed_agents',
  'jwt_subject',
  'jwt_provider',
] as const;

/** An id that is one etcd key segment an operator can type. */
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** The longest grace a rotation may give the old key. */
export const MAX_GRACE_SECS = 30 * 86_400;
export const DEFAULT_GRACE_SECS = 3_600;
/** Attempts of one read-compute-write when other writers keep winning. */
const ATTEMPTS = 5;

// Unknown members of a stored row (written by a newer control plane) are kept, not judged.
const KnownMembers = z.object(apiKeyShape);

/** The outcome of a write: the row as stored, its revision, and the plaintext when one was issued. */
export interface KeyWrite {
  id: string;
  value: Record<string, unknown>;
  revision: number;
  key?: string;
}

const bad = (message: string) => new ProxyError(400, 'invalid_request_error', message);
const notFound = (id: string) => new ProxyError(404, 'not_found', `no api_keys row "${id}"`);
const conflict = () =>
  new ProxyError(409, 'invalid_request_error', 'the row kept changing under this write: retry it', 'conflict');

/** A new plaintext key: 32 random bytes, base64url, behind a prefix a secret scanner can match. */
export function newPlaintextKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `sk-sluice-${base64Encode(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')}`;
}

/** The body's members, or why it cannot be applied: only editable members; `null` removes one. */
export function editsOf(body: unknown): Record<string, unknown> | ProxyError {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return bad('the body must be a JSON object');
  for (const k of Object.keys(body)) {
    if (k === 'id') continue;
    if (k === 'key_hash' || k === 'previous_key_hashes') {
      return bad(`${k}: set by the server; issue a key with POST /admin/v1/api_keys or rotate it with …/rotate`);
    }
    if (!(EDITABLE as readonly string[]).includes(k)) {
      return bad(`${k}: not a member a write may set (${EDITABLE.join(', ')})`);
    }
  }
  const { id: _id, ...edits } = body as Record<string, unknown>;
  return edits;
}

/** `doc` with `edits` applied (`null` removes the member), or the first schema issue as a 400. */
function applyEdits(
  doc: Record<string, unknown>,
  edits: Record<string, unknown>,
): Record<string, unknown> | ProxyError {
  const out = { ...doc };
  for (const [k, v] of Object.entries(edits)) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  const r = KnownMembers.safeParse(out);
  if (!r.success) {
    const i = r.error.issues[0]!;
    return bad(`${i.path.join('.') || '(body)'}: ${i.message}`);
  }
  return out;
}

export class KeyWrites {
  constructor(private readonly rows: RowStore, private readonly now: () => number) {}

  async issue(body: unknown): Promise<KeyWrite | ProxyError> {
    const edits = editsOf(body);
    if (edits instanceof ProxyError) return edits;
    const given = (body as Record<string, unknown>).id;
    if (given !== undefined && (typeof given !== 'string' || !ID.test(given))) {
      return bad('id: letters, digits, `.`, `_`, `-` (at most 128), starting with a letter or digit; or omit it');
    }
    const id = given ?? crypto.randomUUID();
    const key = newPlaintextKey();
    const doc = applyEdits({ key_hash: await sha256Hex(key) }, edits);
    if (doc instanceof ProxyError) return doc;
    const revision = await this.rows.put('api_keys', id, doc, 0);
    if (revision === undefined) {
      return new ProxyError(409, 'invalid_request_error', `api_keys row "${id}" exists`, 'conflict');
    }
    return { id, value: doc, revision, key };
  }

  update(id: string, body: unknown): Promise<KeyWrite | ProxyError> {
    const edits = editsOf(body);
    if (edits instanceof ProxyError) return Promise.resolve(edits);
    return this.change(id, (doc) => applyEdits(doc, edits));
  }

  /** A new key; the replaced hash authenticates until `grace_seconds` from now (0: not at all). */
  async rotate(id: string, body: unknown): Promise<KeyWrite | ProxyError> {
    const raw = (body ?? {}) as Record<string, unknown>;
    const grace = raw.grace_seconds ?? DEFAULT_GRACE_SECS;
    if (typeof grace !== 'number' || !Number.isInteger(grace) || grace < 0 || grace > MAX_GRACE_SECS) {
      return bad(`grace_seconds: a whole number of seconds from 0 to ${MAX_GRACE_SECS}`);
    }
    const key = newPlaintextKey();
    const hash = await sha256Hex(key);
    const w = await this.change(id, (doc) => {
      const now = this.now();
      const kept = previousHashes(doc).filter((p) => Date.parse(p.expires_at) > now);
      if (grace > 0 && typeof doc.key_hash === 'string') {
        kept.push({ key_hash: doc.key_hash, expires_at: new Date(now + grace * 1000).toISOString() });
      }
      const { previous_key_hashes: _p, ...rest } = doc;
      return { ...rest, key_hash: hash, ...(kept.length ? { previous_key_hashes: kept } : {}) };
    });
    return w instanceof ProxyError ? w : { ...w, key };
  }

  /** Disabled at once, with every hash a rotation left valid. */
  revoke(id: string): Promise<KeyWrite | ProxyError> {
    return this.change(id, (doc) => {
      const { previous_key_hashes: _p, ...rest } = doc;
      return { ...rest, disabled: true };
    });
  }

  async remove(id: string): Promise<{ id: string; revision: number } | ProxyError> {
    for (let i = 0; i < ATTEMPTS; i++) {
      const row = await this.rows.get('api_keys', id);
      if (!row) return notFound(id);
      const revision = await this.rows.delete('api_keys', id, row.modRevision);
      if (revision !== undefined) return { id, revision };
    }
    return conflict();
  }

  private change(
    id: string,
    next: (doc: Record<string, unknown>) => Record<string, unknown> | ProxyError,
  ): Promise<KeyWrite | ProxyError> {
    return changeRow(this.rows, 'api_keys', id, next);
  }
}

/**
 * Read the row, compute its next document, write it if the row is still at the revision read; again from the
 * row as it now is when another write got there first.
 */
export async function changeRow(
  rows: RowStore,
  kind: string,
  id: string,
  next: (doc: Record<string, unknown>) => Record<string, unknown> | ProxyError,
): Promise<KeyWrite | ProxyError> {
  for (let i = 0; i < ATTEMPTS; i++) {
    const row: StoredRow | undefined = await rows.get(kind, id);
    if (!row) return new ProxyError(404, 'not_found', `no ${kind} row "${id}"`);
    const doc = next(row.value);
    if (doc instanceof ProxyError) return doc;
    const revision = await rows.put(kind, id, doc, row.modRevision);
    if (revision !== undefined) return { id, value: doc, revision };
  }
  return conflict();
}

function previousHashes(doc: Record<string, unknown>): { key_hash: string; expires_at: string }[] {
  const v = doc.previous_key_hashes;
  if (!Array.isArray(v)) return [];
  return v.filter((p): p is { key_hash: string; expires_at: string } =>
    p !== null && typeof p === 'object' && typeof p.key_hash === 'string' && typeof p.expires_at === 'string'
  );
}
