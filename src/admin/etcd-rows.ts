// The admin write API's view of etcd (docs/admin.md "Concurrent writes"): one row read by its exact key, and writes that
// only succeed if the row is still at the revision the write was computed from, so two admins (or two
// replicas) changing one key never lose each other's change. Every replica then applies the row through its
// watch, like any other write to etcd.
import { base64Encode } from '../util/bytes.ts';
import { encodeUtf8, type EtcdClient } from '../sources/etcd/client.ts';

/** A row as stored: its JSON document and the revision it was last written at. */
export interface StoredRow {
  value: Record<string, unknown>;
  modRevision: number;
}

/** Where writes go; `EtcdRowStore` in a gateway, a map in unit tests. */
export interface RowStore {
  get(kind: string, id: string): Promise<StoredRow | undefined>;
  /** Writes the row if it is still at `expected` (0: if it does not exist). The new revision, or undefined. */
  put(kind: string, id: string, value: Record<string, unknown>, expected: number): Promise<number | undefined>;
  /** Deletes the row if it is still at `expected`. The new revision, or undefined. */
  delete(kind: string, id: string, expected: number): Promise<number | undefined>;
}

type Client = Pick<EtcdClient, 'range' | 'unary'>;

export class EtcdRowStore implements RowStore {
  constructor(private readonly client: Client, private readonly prefix: string) {}

  private key(kind: string, id: string): string {
    return `${this.prefix.replace(/\/+$/, '')}/${kind}/${id}`;
  }

  async get(kind: string, id: string): Promise<StoredRow | undefined> {
    const key = this.key(kind, id);
    // A prefix range also returns `<id>/…`: only the exact key is the row.
    const kv = (await this.client.range(key)).kvs.find((x) => x.key === key);
    if (!kv) return undefined;
    let value: unknown;
    try {
      value = JSON.parse(kv.value);
    } catch {
      value = undefined;
    }
    const doc = value !== null && typeof value === 'object' && !Array.isArray(value)
      ? value as Record<string, unknown>
      : {};
    return { value: doc, modRevision: kv.modRevision };
  }

  put(kind: string, id: string, value: Record<string, unknown>, expected: number): Promise<number | undefined> {
    const key = base64Encode(encodeUtf8(this.key(kind, id)));
    const put = { request_put: { key, value: base64Encode(encodeUtf8(JSON.stringify(value))) } };
    return this.txn(key, expected, put);
  }

  delete(kind: string, id: string, expected: number): Promise<number | undefined> {
    const key = base64Encode(encodeUtf8(this.key(kind, id)));
    return this.txn(key, expected, { request_delete_range: { key } });
  }

  private async txn(key: string, expected: number, op: unknown): Promise<number | undefined> {
    // etcd's JSON gateway writes int64 as strings and omits false and zero.
    const compare = expected === 0
      ? { key, result: 'EQUAL', target: 'CREATE', create_revision: '0' }
      : { key, result: 'EQUAL', target: 'MOD', mod_revision: String(expected) };
    const body = await this.client.unary('/v3/kv/txn', { compare: [compare], success: [op] }) as {
      succeeded?: boolean;
      header?: { revision?: string };
    };
    return body.succeeded ? Number(body.header?.revision ?? 0) : undefined;
  }
}

/** A store in memory with etcd's revision arithmetic (unit tests; one process). */
export class MemoryRows implements RowStore {
  readonly rows = new Map<string, StoredRow>();
  revision = 1;

  get(kind: string, id: string): Promise<StoredRow | undefined> {
    return Promise.resolve(this.rows.get(`${kind}/${id}`));
  }

  put(kind: string, id: string, value: Record<string, unknown>, expected: number): Promise<number | undefined> {
    const k = `${kind}/${id}`;
    if ((this.rows.get(k)?.modRevision ?? 0) !== expected) return Promise.resolve(undefined);
    this.rows.set(k, { value: structuredClone(value), modRevision: ++this.revision });
    return Promise.resolve(this.revision);
  }

  delete(kind: string, id: string, expected: number): Promise<number | undefined> {
    const k = `${kind}/${id}`;
    if ((this.rows.get(k)?.modRevision ?? 0) !== expected || expected === 0) return Promise.resolve(undefined);
    this.rows.delete(k);
    return Promise.resolve(++this.revision);
  }
}
